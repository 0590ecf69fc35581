! The rest of the module on the default device: devices, reduce on a
! wrapped array (f32 and f64, with a record), a conv2d on C-order arrays
! against the definition, and failures that give their status and
! message instead of stopping.
program test_ops
    use, intrinsic :: iso_c_binding
    use locus
    implicit none
    type(locus_context_t) :: context
    type(locus_device_t) :: device
    integer :: status, count

    call locus_context_create(context)
    count = locus_device_count(context)
    if (count < 1) call die('no device')
    call locus_device_get(context, 1, device)
    write (*, '(a,i0,4a)') 'devices: ', count, '; first: ', &
        locus_device_selector(device), ' ', locus_device_name(device)
    call locus_device_find(context, 'cpu', device)
    if (locus_device_selector(device) /= 'cpu') call die('find cpu')

    call check_reduce()
    call check_conv2d()
    call check_errors()

    call locus_context_destroy(context)
    write (*, '(a)') 'fortran ops: ok'

contains

    subroutine die(message)
        character(len=*), intent(in) :: message
        write (*, '(a)') 'FAIL: '//message
        error stop 1
    end subroutine

    subroutine check_reduce()
        real(c_float), allocatable, target :: x(:, :)
        real(c_double), allocatable, target :: y(:)
        type(locus_buffer_t) :: buffer
        type(locus_record_t) :: record
        real(c_double) :: result
        integer :: i
        allocate (x(7, 3), y(100))
        x = reshape([(real(i, c_float), i=1, 21)], [7, 3])
        call locus_buffer_wrap(context, x, buffer)
        call locus_reduce(context, buffer, LOCUS_REDUCE_SUM, result, &
            record=record)
        if (result /= 231) call die('f32 sum')
        if (locus_string(record%op) /= 'reduce' .or. &
            locus_string(record%dtype) /= 'f32' .or. record%bytes /= 84) &
            call die('reduce record: '//locus_record_json(record))
        if (index(locus_record_json(record), '"op":"reduce"') == 0) &
            call die('record json: '//locus_record_json(record))
        call locus_reduce(context, buffer, LOCUS_REDUCE_MAX, result, count=10)
        if (result /= 10) call die('f32 max of the first 10')
        call locus_buffer_destroy(buffer)

        y = [(-0.5d0*i, i=1, 100)]
        call locus_buffer_wrap(context, y, buffer)
        call locus_reduce(context, buffer, LOCUS_REDUCE_MIN, result)
        if (result /= -50) call die('f64 min')
        call locus_reduce(context, buffer, LOCUS_REDUCE_SUM, result)
        if (result /= -2525) call die('f64 sum')
        call locus_buffer_destroy(buffer)
    end subroutine

    ! batch 2, 3 -> 4 channels, 6 x 5 image, 3 x 2 kernel, stride 1 and 2,
    ! padding 1: in C order, x(w, h, c, n) and f(s, r, c, k).
    subroutine check_conv2d()
        integer, parameter :: nb = 2, nc = 3, nh = 6, nw = 5, nk = 4, &
            kr = 3, ks = 2
        real(c_double), allocatable, target :: x(:, :, :, :), f(:, :, :, :), &
            out(:, :, :, :), bias(:)
        type(locus_conv2d_desc_t) :: desc
        type(locus_buffer_t) :: bx, bf, bo, bb
        type(locus_record_t) :: record
        real(c_double) :: expected, v
        integer :: p, q, i, n, k, c, oh, ow, r, s, ih, iw
        allocate (x(nw, nh, nc, nb), f(ks, kr, nc, nk), bias(nk))
        x = reshape([(sin(0.37d0*i), i=1, size(x))], shape(x))
        f = reshape([(cos(0.53d0*i), i=1, size(f))], shape(f))
        bias = [0.25d0, -0.5d0, 1d0, 2d0]
        call locus_conv2d_desc_init(desc)
        desc%batch = nb
        desc%in_channels = nc
        desc%in_height = nh
        desc%in_width = nw
        desc%out_channels = nk
        desc%kernel_height = kr
        desc%kernel_width = ks
        desc%stride_h = 1
        desc%stride_w = 2
        desc%pad_h = 1
        desc%pad_w = 1
        call locus_conv2d_output_shape(desc, p, q)
        if (p /= 6 .or. q /= 3) call die('conv2d output shape')
        allocate (out(q, p, nk, nb))
        out = -1
        call locus_buffer_wrap(context, x, bx)
        call locus_buffer_wrap(context, f, bf)
        call locus_buffer_wrap(context, out, bo)
        call locus_buffer_wrap(context, bias, bb)
        call locus_conv2d(context, desc, bx, bf, bo, bias=bb, record=record)
        if (locus_string(record%op) /= 'conv2d') call die('conv2d record')
        do n = 1, nb
            do k = 1, nk
                do oh = 1, p
                    do ow = 1, q
                        expected = bias(k)
                        do c = 1, nc
                            do r = 1, kr
                                do s = 1, ks
                                    ih = (oh - 1) + (r - 1) - 1 + 1
                                    iw = (ow - 1)*2 + (s - 1) - 1 + 1
                                    if (ih < 1 .or. ih > nh .or. iw < 1 .or. &
                                        iw > nw) cycle
                                    expected = expected + x(iw, ih, c, n)* &
                                        f(s, r, c, k)
                                end do
                            end do
                        end do
                        v = out(ow, oh, k, n)
                        if (abs(v - expected) > 1d-12) then
                            write (*, *) n, k, oh, ow, v, expected
                            call die('conv2d value')
                        end if
                    end do
                end do
            end do
        end do
        call locus_buffer_destroy(bx)
        call locus_buffer_destroy(bf)
        call locus_buffer_destroy(bo)
        call locus_buffer_destroy(bb)
    end subroutine

    ! Bad sizes come back as a status and a message; nothing stops.
    subroutine check_errors()
        real(c_float), allocatable, target :: x(:), a(:, :), c(:, :)
        type(locus_buffer_t) :: buffer
        real(c_double) :: result
        allocate (x(4), a(3, 3), c(3, 3))
        x = 1
        a = 1
        c = 0
        call locus_buffer_wrap(context, x, buffer)
        call locus_reduce(context, buffer, LOCUS_REDUCE_SUM, result, count=5, &
            status=status)
        if (status /= LOCUS_ERROR_BUFFER_TOO_SMALL) call die('reduce count 5')
        if (index(locus_last_error(), 'buffer') == 0) &
            call die('reduce message: '//locus_last_error())
        write (*, '(a)') 'reduce past the end: '//locus_last_error()
        call locus_buffer_destroy(buffer)

        ! lda below the rows of A, as SGEMM's argument check.
        call locus_gemm(context, 'N', 'N', 3, 3, 3, 1.0_c_float, a, 2, a, 3, &
            0.0_c_float, c, 3, status=status)
        if (status /= LOCUS_ERROR_INVALID_ARGUMENT .or. &
            index(locus_last_error(), 'lda') == 0) &
            call die('gemm lda 2: '//locus_last_error())
        write (*, '(a)') 'gemm lda 2: '//locus_last_error()
        call locus_gemm(context, 'X', 'N', 3, 3, 3, 1.0_c_float, a, 3, a, 3, &
            0.0_c_float, c, 3, status=status)
        if (status /= LOCUS_ERROR_INVALID_ARGUMENT) call die('gemm transa X')
        ! The output over an input: the C API refuses, the module says so.
        call locus_gemm(context, 'N', 'N', 3, 3, 3, 1.0_c_float, a, 3, a, 3, &
            0.0_c_float, a, 3, status=status)
        if (status /= LOCUS_ERROR_INVALID_ARGUMENT) call die('gemm c = a')
        write (*, '(a)') 'gemm C over A: '//locus_last_error()

        ! n = 0: BLAS's quick return, C untouched.
        c = 7
        call locus_gemm(context, 'N', 'T', 3, 0, 3, 1.0_c_float, a, 3, a, 1, &
            0.0_c_float, c, 3, status=status)
        if (status /= LOCUS_SUCCESS .or. any(c /= 7)) &
            call die('gemm n = 0: '//locus_last_error())

        call locus_device_find(context, 'no-such-backend', device, &
            status=status)
        if (status == LOCUS_SUCCESS) call die('bad selector accepted')
        if (locus_status_string(status) /= locus_status_string(status)) &
            call die('status string')
        if (locus_status_string(LOCUS_ERROR_BUFFER_TOO_SMALL) /= &
            'buffer too small for the shape') call die('status string text')
        call locus_reduce(context, buffer, LOCUS_REDUCE_SUM, result, &
            status=status)
        if (status == LOCUS_SUCCESS) call die('reduce on a destroyed buffer')
    end subroutine
end program test_ops
