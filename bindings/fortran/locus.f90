! Locus from Fortran 2008: `use locus` (docs/BUILDING.md, "Fortran").
!
! Status handling: every procedure that can fail takes an optional
! `status` (intent(out)). Given, it receives the locus status (0 is
! LOCUS_SUCCESS) and locus_last_error() the detail. Absent, a failure
! writes "locus: <procedure>: <detail>" to error_unit and stops with
! `error stop`, as Fortran libraries commonly do with an error nobody
! asked to see.
!
! Arrays are used in place, never copied: locus_buffer_wrap adopts a
! contiguous array, locus_gemm wraps its operands for the call. The arrays
! must have the TARGET attribute (or be pointers) and outlive the buffers.
module locus
    use, intrinsic :: iso_c_binding
    use, intrinsic :: iso_fortran_env, only: error_unit
    use locus_c
    implicit none
    private

    ! Status codes: locus.h's LOCUS_STATUS_LIST.
    integer, parameter, public :: LOCUS_SUCCESS = 0
    integer, parameter, public :: LOCUS_ERROR_NULL_ARGUMENT = -1
    integer, parameter, public :: LOCUS_ERROR_INVALID_ARGUMENT = -2
    integer, parameter, public :: LOCUS_ERROR_SIZE_OVERFLOW = -3
    integer, parameter, public :: LOCUS_ERROR_BUFFER_TOO_SMALL = -4
    integer, parameter, public :: LOCUS_ERROR_OUT_OF_MEMORY = -5
    integer, parameter, public :: LOCUS_ERROR_DEVICE_OUT_OF_MEMORY = -6
    integer, parameter, public :: LOCUS_ERROR_DEVICE_NOT_FOUND = -7
    integer, parameter, public :: LOCUS_ERROR_NOT_SUPPORTED = -8
    integer, parameter, public :: LOCUS_ERROR_BAD_ENVIRONMENT = -9
    integer, parameter, public :: LOCUS_ERROR_PLACEMENT = -10
    integer, parameter, public :: LOCUS_ERROR_TOPOLOGY = -11
    integer, parameter, public :: LOCUS_ERROR_PLUGIN = -12
    integer, parameter, public :: LOCUS_ERROR_BACKEND = -13
    integer, parameter, public :: LOCUS_ERROR_BUSY = -14
    integer, parameter, public :: LOCUS_ERROR_SYSTEM = -15
    integer, parameter, public :: LOCUS_ERROR_DEVICE_UNAVAILABLE = -16
    integer, parameter, public :: LOCUS_ERROR_UNUSABLE_ENVIRONMENT = -17

    integer, parameter, public :: LOCUS_DTYPE_F32 = 1, LOCUS_DTYPE_F64 = 2
    integer, parameter, public :: LOCUS_REDUCE_SUM = 0, LOCUS_REDUCE_MIN = 1, &
        LOCUS_REDUCE_MAX = 2
    integer, parameter, public :: LOCUS_CONV_AUTO = 0, LOCUS_CONV_IM2COL = 1, &
        LOCUS_CONV_MEC = 2, LOCUS_CONV_IMPLICIT_GEMM = 3, &
        LOCUS_CONV_WINOGRAD = 4
    integer, parameter, public :: LOCUS_MATH_FP32 = 0, LOCUS_MATH_TF32 = 1, &
        LOCUS_MATH_3XTF32 = 2
    integer, parameter, public :: LOCUS_ACTIVATION_NONE = 0, &
        LOCUS_ACTIVATION_RELU = 1, LOCUS_ACTIVATION_RELU6 = 2
    integer, parameter, public :: LOCUS_LAYOUT_NCHW = 0, LOCUS_LAYOUT_NHWC = 1

    public :: locus_record_t, locus_conv2d_desc_t, locus_estimate_t
    public :: locus_record_max_estimates

    type, public :: locus_context_t
        type(c_ptr) :: ptr = c_null_ptr
    end type

    !> Owned by its context; valid as long as the context.
    type, public :: locus_device_t
        type(c_ptr) :: ptr = c_null_ptr
    end type

    !> A wrapped Fortran array: its element type and count travel with it.
    type, public :: locus_buffer_t
        type(c_ptr) :: ptr = c_null_ptr
        integer :: dtype = 0
        integer(c_size_t) :: count = 0
    end type

    public :: locus_status_string, locus_last_error, locus_string
    public :: locus_context_create, locus_context_destroy
    public :: locus_device_count, locus_device_get, locus_device_find
    public :: locus_device_name, locus_device_selector
    public :: locus_buffer_wrap, locus_buffer_destroy
    public :: locus_record_json, locus_reduce
    public :: locus_gemm, locus_sgemm, locus_dgemm
    public :: locus_conv2d_desc_init, locus_conv2d_output_shape, locus_conv2d

    !> call locus_buffer_wrap(context, array, buffer [, status]): a buffer
    !> over a contiguous real(c_float) or real(c_double) array of rank 1 to
    !> 4, without a copy. For another rank, pass a rank-1 pointer to the
    !> same storage (c_f_pointer).
    interface locus_buffer_wrap
        module procedure wrap_f32_1, wrap_f32_2, wrap_f32_3, wrap_f32_4
        module procedure wrap_f64_1, wrap_f64_2, wrap_f64_3, wrap_f64_4
    end interface

    !> call locus_gemm(context, transa, transb, m, n, k, alpha, a, lda, b,
    !> ldb, beta, c, ldc [, device, status, record]): what SGEMM and DGEMM
    !> compute, C = alpha op(A) op(B) + beta C on column-major arrays, with
    !> BLAS's argument rules (transa, transb 'N', 'T' or 'C'; lda at least
    !> max(1, rows of A as stored)) and the C API's beta = 0 and alpha = 0
    !> rules. The kind of alpha picks single or double precision.
    interface locus_gemm
        module procedure locus_sgemm, locus_dgemm
    end interface

    ! The detail of the calling thread's last failure, saved before any
    ! clean-up call can clear C's.
    character(len=2048), save :: last_message = ''
    !$omp threadprivate(last_message)

contains

    !> A C string (char array ending in NUL, as the record's fields) as a
    !> Fortran string.
    function locus_string(chars) result(text)
        character(kind=c_char), intent(in) :: chars(:)
        character(len=:), allocatable :: text
        integer :: i, length
        length = size(chars)
        do i = 1, size(chars)
            if (chars(i) == c_null_char) then
                length = i - 1
                exit
            end if
        end do
        allocate (character(len=length) :: text)
        do i = 1, length
            text(i:i) = chars(i)
        end do
    end function

    function from_c_pointer(p) result(text)
        type(c_ptr), intent(in) :: p
        character(len=:), allocatable :: text
        character(kind=c_char), pointer :: chars(:)
        if (.not. c_associated(p)) then
            text = ''
            return
        end if
        call c_f_pointer(p, chars, [c_strlen(p)])
        text = locus_string(chars)
    end function

    function to_c(text) result(chars)
        character(len=*), intent(in) :: text
        character(kind=c_char) :: chars(len(text) + 1)
        integer :: i
        do i = 1, len(text)
            chars(i) = text(i:i)
        end do
        chars(len(text) + 1) = c_null_char
    end function

    !> The fixed message of a status ("unknown status" for other values).
    function locus_status_string(code) result(text)
        integer, intent(in) :: code
        character(len=:), allocatable :: text
        text = from_c_pointer(c_locus_status_str(int(code, c_int)))
    end function

    !> The detail of the calling thread's last failure: the status message
    !> plus the offending value; '' after a success.
    function locus_last_error() result(text)
        character(len=:), allocatable :: text
        text = trim(last_message)
    end function

    ! Every public procedure ends here with its C status (or its own).
    subroutine finish(code, where, status)
        integer(c_int), intent(in) :: code
        character(len=*), intent(in) :: where
        integer, intent(out), optional :: status
        if (code == LOCUS_SUCCESS) then
            last_message = ''
        end if
        if (present(status)) then
            status = int(code)
            return
        end if
        if (code /= LOCUS_SUCCESS) then
            write (error_unit, '(a)') 'locus: '//where//': '//trim(last_message)
            error stop 1
        end if
    end subroutine

    ! Saves C's detail of a failure at once (the next C call clears it).
    subroutine save_c_error(code)
        integer(c_int), intent(in) :: code
        if (code /= LOCUS_SUCCESS) last_message = from_c_pointer(c_locus_last_error())
    end subroutine

    subroutine fail(code, where, message, status)
        integer, intent(in) :: code
        character(len=*), intent(in) :: where, message
        integer, intent(out), optional :: status
        last_message = locus_status_string(code)//': '//message
        call finish(int(code, c_int), where, status)
    end subroutine

    !> A context; device, backends and threads take precedence over
    !> LOCUS_DEVICE, LOCUS_BACKENDS and LOCUS_THREADS (docs/ENV.md).
    subroutine locus_context_create(context, device, backends, threads, status)
        type(locus_context_t), intent(out) :: context
        character(len=*), intent(in), optional :: device, backends, threads
        integer, intent(out), optional :: status
        type(locus_context_options_t) :: options
        character(kind=c_char), allocatable, target :: device_c(:), &
            backends_c(:), threads_c(:)
        integer(c_int) :: code
        call c_locus_context_options_init(options)
        if (present(device)) then
            device_c = to_c(device)
            options%device = c_loc(device_c)
        end if
        if (present(backends)) then
            backends_c = to_c(backends)
            options%backends = c_loc(backends_c)
        end if
        if (present(threads)) then
            threads_c = to_c(threads)
            options%threads = c_loc(threads_c)
        end if
        code = c_locus_context_create(options, context%ptr)
        call save_c_error(code)
        call finish(code, 'locus_context_create', status)
    end subroutine

    !> Destroy the context's buffers first (LOCUS_ERROR_BUSY otherwise).
    subroutine locus_context_destroy(context, status)
        type(locus_context_t), intent(inout) :: context
        integer, intent(out), optional :: status
        integer(c_int) :: code
        code = c_locus_context_destroy(context%ptr)
        call save_c_error(code)
        if (code == LOCUS_SUCCESS) context%ptr = c_null_ptr
        call finish(code, 'locus_context_destroy', status)
    end subroutine

    function locus_device_count(context, status) result(count)
        type(locus_context_t), intent(in) :: context
        integer, intent(out), optional :: status
        integer :: count
        integer(c_size_t) :: n
        integer(c_int) :: code
        n = 0
        code = c_locus_device_count(context%ptr, n)
        call save_c_error(code)
        count = int(n)
        call finish(code, 'locus_device_count', status)
    end function

    !> The device of number index, from 1 to locus_device_count (the C
    !> API counts from 0).
    subroutine locus_device_get(context, index, device, status)
        type(locus_context_t), intent(in) :: context
        integer, intent(in) :: index
        type(locus_device_t), intent(out) :: device
        integer, intent(out), optional :: status
        integer(c_int) :: code
        if (index < 1) then
            call fail(LOCUS_ERROR_INVALID_ARGUMENT, 'locus_device_get', &
                'device numbers start at 1', status)
            return
        end if
        code = c_locus_device_get(context%ptr, int(index - 1, c_size_t), &
            device%ptr)
        call save_c_error(code)
        call finish(code, 'locus_device_get', status)
    end subroutine

    !> The first device matching a LOCUS_DEVICE selector ("cpu", "cuda:0").
    subroutine locus_device_find(context, selector, device, status)
        type(locus_context_t), intent(in) :: context
        character(len=*), intent(in) :: selector
        type(locus_device_t), intent(out) :: device
        integer, intent(out), optional :: status
        integer(c_int) :: code
        code = c_locus_device_find(context%ptr, to_c(selector), device%ptr)
        call save_c_error(code)
        call finish(code, 'locus_device_find', status)
    end subroutine

    function device_info(device, status) result(info)
        type(locus_device_t), intent(in) :: device
        integer, intent(out), optional :: status
        type(locus_device_info_t) :: info
        integer(c_int) :: code
        call c_locus_device_info_init(info)
        code = c_locus_device_get_info(device%ptr, info)
        call save_c_error(code)
        call finish(code, 'locus_device_get_info', status)
    end function

    !> The device's name as its driver gives it.
    function locus_device_name(device, status) result(name)
        type(locus_device_t), intent(in) :: device
        integer, intent(out), optional :: status
        character(len=:), allocatable :: name
        type(locus_device_info_t) :: info
        info = device_info(device, status)
        name = locus_string(info%name)
    end function

    !> The device's canonical selector: "cpu", "cuda:0", "opencl:1".
    function locus_device_selector(device, status) result(selector)
        type(locus_device_t), intent(in) :: device
        integer, intent(out), optional :: status
        character(len=:), allocatable :: selector
        type(locus_device_info_t) :: info
        info = device_info(device, status)
        selector = locus_string(info%selector)
    end function

    subroutine wrap_memory(context, memory, count, dtype, buffer, status)
        type(locus_context_t), intent(in) :: context
        type(c_ptr), intent(in) :: memory
        integer(c_size_t), intent(in) :: count
        integer, intent(in) :: dtype
        type(locus_buffer_t), intent(out) :: buffer
        integer, intent(out), optional :: status
        integer(c_size_t) :: element_bytes
        integer(c_int) :: code
        element_bytes = 4
        if (dtype == LOCUS_DTYPE_F64) element_bytes = 8
        code = c_locus_buffer_wrap(context%ptr, memory, count*element_bytes, &
            buffer%ptr)
        call save_c_error(code)
        if (code == LOCUS_SUCCESS) then
            buffer%dtype = dtype
            buffer%count = count
        end if
        call finish(code, 'locus_buffer_wrap', status)
    end subroutine

    subroutine wrap_f32_1(context, array, buffer, status)
        type(locus_context_t), intent(in) :: context
        real(c_float), intent(inout), target, contiguous :: array(:)
        type(locus_buffer_t), intent(out) :: buffer
        integer, intent(out), optional :: status
        call wrap_memory(context, c_loc(array), size(array, kind=c_size_t), &
            LOCUS_DTYPE_F32, buffer, status)
    end subroutine
    subroutine wrap_f32_2(context, array, buffer, status)
        type(locus_context_t), intent(in) :: context
        real(c_float), intent(inout), target, contiguous :: array(:, :)
        type(locus_buffer_t), intent(out) :: buffer
        integer, intent(out), optional :: status
        call wrap_memory(context, c_loc(array), size(array, kind=c_size_t), &
            LOCUS_DTYPE_F32, buffer, status)
    end subroutine
    subroutine wrap_f32_3(context, array, buffer, status)
        type(locus_context_t), intent(in) :: context
        real(c_float), intent(inout), target, contiguous :: array(:, :, :)
        type(locus_buffer_t), intent(out) :: buffer
        integer, intent(out), optional :: status
        call wrap_memory(context, c_loc(array), size(array, kind=c_size_t), &
            LOCUS_DTYPE_F32, buffer, status)
    end subroutine
    subroutine wrap_f32_4(context, array, buffer, status)
        type(locus_context_t), intent(in) :: context
        real(c_float), intent(inout), target, contiguous :: array(:, :, :, :)
        type(locus_buffer_t), intent(out) :: buffer
        integer, intent(out), optional :: status
        call wrap_memory(context, c_loc(array), size(array, kind=c_size_t), &
            LOCUS_DTYPE_F32, buffer, status)
    end subroutine
    subroutine wrap_f64_1(context, array, buffer, status)
        type(locus_context_t), intent(in) :: context
        real(c_double), intent(inout), target, contiguous :: array(:)
        type(locus_buffer_t), intent(out) :: buffer
        integer, intent(out), optional :: status
        call wrap_memory(context, c_loc(array), size(array, kind=c_size_t), &
            LOCUS_DTYPE_F64, buffer, status)
    end subroutine
    subroutine wrap_f64_2(context, array, buffer, status)
        type(locus_context_t), intent(in) :: context
        real(c_double), intent(inout), target, contiguous :: array(:, :)
        type(locus_buffer_t), intent(out) :: buffer
        integer, intent(out), optional :: status
        call wrap_memory(context, c_loc(array), size(array, kind=c_size_t), &
            LOCUS_DTYPE_F64, buffer, status)
    end subroutine
    subroutine wrap_f64_3(context, array, buffer, status)
        type(locus_context_t), intent(in) :: context
        real(c_double), intent(inout), target, contiguous :: array(:, :, :)
        type(locus_buffer_t), intent(out) :: buffer
        integer, intent(out), optional :: status
        call wrap_memory(context, c_loc(array), size(array, kind=c_size_t), &
            LOCUS_DTYPE_F64, buffer, status)
    end subroutine
    subroutine wrap_f64_4(context, array, buffer, status)
        type(locus_context_t), intent(in) :: context
        real(c_double), intent(inout), target, contiguous :: array(:, :, :, :)
        type(locus_buffer_t), intent(out) :: buffer
        integer, intent(out), optional :: status
        call wrap_memory(context, c_loc(array), size(array, kind=c_size_t), &
            LOCUS_DTYPE_F64, buffer, status)
    end subroutine

    !> Waits for ops on it; the array keeps the newest data.
    subroutine locus_buffer_destroy(buffer)
        type(locus_buffer_t), intent(inout) :: buffer
        call c_locus_buffer_destroy(buffer%ptr)
        buffer%ptr = c_null_ptr
        buffer%count = 0
    end subroutine

    !> The record as one JSON object (locus_record_to_json).
    function locus_record_json(record) result(text)
        type(locus_record_t), intent(in) :: record
        character(len=:), allocatable :: text
        character(kind=c_char), allocatable, target :: chars(:)
        integer(c_size_t) :: needed
        needed = c_locus_record_to_json(record, c_null_ptr, 0_c_size_t)
        allocate (chars(needed + 1))
        needed = c_locus_record_to_json(record, c_loc(chars), needed + 1)
        text = locus_string(chars)
    end function

    function device_ptr(device) result(p)
        type(locus_device_t), intent(in), optional :: device
        type(c_ptr) :: p
        p = c_null_ptr
        if (present(device)) p = device%ptr
    end function

    ! The record argument as C takes it: NULL when absent, else initialized.
    function record_ptr(record) result(p)
        type(locus_record_t), intent(inout), optional, target :: record
        type(c_ptr) :: p
        p = c_null_ptr
        if (present(record)) then
            call c_locus_record_init(record)
            p = c_loc(record)
        end if
    end function

    !> result = the sum, min or max (op: LOCUS_REDUCE_*) of the buffer's
    !> first count elements (default: all), as a double.
    subroutine locus_reduce(context, x, op, result, count, device, status, &
            record)
        type(locus_context_t), intent(in) :: context
        type(locus_buffer_t), intent(in) :: x
        integer, intent(in) :: op
        real(c_double), intent(out) :: result
        integer, intent(in), optional :: count
        type(locus_device_t), intent(in), optional :: device
        integer, intent(out), optional :: status
        type(locus_record_t), intent(out), optional, target :: record
        type(locus_reduce_desc_t) :: desc
        integer(c_int) :: code
        call c_locus_reduce_desc_init(desc)
        desc%dtype = int(x%dtype, c_int)
        desc%op = int(op, c_int)
        desc%count = x%count
        if (present(count)) then
            if (count < 0) then
                call fail(LOCUS_ERROR_INVALID_ARGUMENT, 'locus_reduce', &
                    'count is negative', status)
                return
            end if
            desc%count = int(count, c_size_t)
        end if
        result = 0
        code = c_locus_reduce(context%ptr, device_ptr(device), desc, x%ptr, &
            result, record_ptr(record))
        call save_c_error(code)
        call finish(code, 'locus_reduce', status)
    end subroutine

    ! BLAS's checks, in BLAS's order of arguments; "" when all pass.
    function gemm_argument_error(transa, transb, m, n, k, lda, ldb, ldc) &
            result(message)
        character, intent(in) :: transa, transb
        integer, intent(in) :: m, n, k, lda, ldb, ldc
        character(len=:), allocatable :: message
        character(len=160) :: line
        line = ''
        if (.not. is_trans(transa) .and. .not. is_no_trans(transa)) then
            write (line, '(3a)') "transa is '", transa, "', not 'N', 'T' or 'C'"
        else if (.not. is_trans(transb) .and. .not. is_no_trans(transb)) then
            write (line, '(3a)') "transb is '", transb, "', not 'N', 'T' or 'C'"
        else if (m < 0 .or. n < 0 .or. k < 0) then
            write (line, '(a,3(1x,i0))') 'negative size: m n k =', m, n, k
        else if (lda < max(1, rows_as_stored(transa, m, k))) then
            write (line, '(a,i0,a,i0)') 'lda = ', lda, ' is less than ', &
                max(1, rows_as_stored(transa, m, k))
        else if (ldb < max(1, rows_as_stored(transb, k, n))) then
            write (line, '(a,i0,a,i0)') 'ldb = ', ldb, ' is less than ', &
                max(1, rows_as_stored(transb, k, n))
        else if (ldc < max(1, m)) then
            write (line, '(a,i0,a,i0)') 'ldc = ', ldc, ' is less than ', max(1, m)
        end if
        message = trim(line)
    end function

    logical function is_no_trans(t)
        character, intent(in) :: t
        is_no_trans = t == 'N' .or. t == 'n'
    end function

    logical function is_trans(t)
        character, intent(in) :: t
        is_trans = t == 'T' .or. t == 't' .or. t == 'C' .or. t == 'c'
    end function

    ! Rows of op(X) = rows x cols as stored in a column-major array.
    integer function rows_as_stored(trans, rows, cols)
        character, intent(in) :: trans
        integer, intent(in) :: rows, cols
        rows_as_stored = rows
        if (is_trans(trans)) rows_as_stored = cols
    end function

    ! Elements BLAS may touch in a column-major rows x cols array with
    ! leading dimension ld: the last column needs only its rows.
    function span(rows, cols, ld) result(elements)
        integer, intent(in) :: rows, cols, ld
        integer(c_size_t) :: elements
        elements = 0
        if (rows > 0 .and. cols > 0) elements = int(cols - 1, c_size_t)* &
            int(ld, c_size_t) + int(rows, c_size_t)
    end function

    ! The column-major product as the row-major C API computes it: a
    ! column-major matrix is its transpose in row-major order, so
    ! C^T = op(B)^T op(A)^T: B goes first, m and n swap, each operand keeps
    ! its transpose flag and leading dimension.
    subroutine gemm_column_major(context, dtype, transa, transb, m, n, k, &
            alpha, a, lda, beta_value, b, ldb, c, ldc, device, status, record)
        type(locus_context_t), intent(in) :: context
        integer, intent(in) :: dtype
        character, intent(in) :: transa, transb
        integer, intent(in) :: m, n, k, lda, ldb, ldc
        real(c_double), intent(in) :: alpha, beta_value
        type(c_ptr), intent(in) :: a, b, c
        type(locus_device_t), intent(in), optional :: device
        integer, intent(out), optional :: status
        type(locus_record_t), intent(out), optional, target :: record
        type(locus_gemm_desc_t) :: desc
        type(locus_buffer_t) :: buffer_a, buffer_b, buffer_c
        character(len=:), allocatable :: message
        integer :: wrap_status
        integer(c_int) :: code
        message = gemm_argument_error(transa, transb, m, n, k, lda, ldb, ldc)
        if (len(message) > 0) then
            call fail(LOCUS_ERROR_INVALID_ARGUMENT, 'locus_gemm', message, status)
            return
        end if
        call wrap_matrix(a, span(rows_as_stored(transa, m, k), &
            rows_as_stored(transa, k, m), lda), buffer_a)
        if (wrap_status == LOCUS_SUCCESS) call wrap_matrix(b, &
            span(rows_as_stored(transb, k, n), rows_as_stored(transb, n, k), &
            ldb), buffer_b)
        if (wrap_status == LOCUS_SUCCESS) call wrap_matrix(c, span(m, n, ldc), &
            buffer_c)
        code = int(wrap_status, c_int)
        if (code == LOCUS_SUCCESS) then
            call c_locus_gemm_desc_init(desc)
            desc%dtype = int(dtype, c_int)
            desc%trans_a = merge(1_c_int, 0_c_int, is_trans(transb))
            desc%trans_b = merge(1_c_int, 0_c_int, is_trans(transa))
            desc%m = int(n, c_size_t)
            desc%n = int(m, c_size_t)
            desc%k = int(k, c_size_t)
            desc%lda = int(ldb, c_size_t)
            desc%ldb = int(lda, c_size_t)
            desc%ldc = int(ldc, c_size_t)
            desc%alpha = alpha
            desc%beta = beta_value
            code = c_locus_gemm(context%ptr, device_ptr(device), desc, &
                buffer_b%ptr, buffer_a%ptr, buffer_c%ptr, record_ptr(record))
            call save_c_error(code)
        end if
        call locus_buffer_destroy(buffer_a)
        call locus_buffer_destroy(buffer_b)
        call locus_buffer_destroy(buffer_c)
        call finish(code, 'locus_gemm', status)
    contains
        ! A matrix of no elements is passed as NULL, as the C API allows.
        subroutine wrap_matrix(memory, elements, buffer)
            type(c_ptr), intent(in) :: memory
            integer(c_size_t), intent(in) :: elements
            type(locus_buffer_t), intent(out) :: buffer
            wrap_status = LOCUS_SUCCESS
            if (elements == 0) return
            call wrap_memory(context, memory, elements, dtype, buffer, &
                wrap_status)
        end subroutine
    end subroutine

    !> SGEMM through Locus (see locus_gemm).
    subroutine locus_sgemm(context, transa, transb, m, n, k, alpha, a, lda, &
            b, ldb, beta, c, ldc, device, status, record)
        type(locus_context_t), intent(in) :: context
        character, intent(in) :: transa, transb
        integer, intent(in) :: m, n, k, lda, ldb, ldc
        real(c_float), intent(in) :: alpha, beta
        real(c_float), intent(in), target :: a(lda, *), b(ldb, *)
        real(c_float), intent(inout), target :: c(ldc, *)
        type(locus_device_t), intent(in), optional :: device
        integer, intent(out), optional :: status
        type(locus_record_t), intent(out), optional :: record
        call gemm_column_major(context, LOCUS_DTYPE_F32, transa, transb, m, &
            n, k, real(alpha, c_double), c_loc(a), lda, real(beta, c_double), &
            c_loc(b), ldb, c_loc(c), ldc, device, status, record)
    end subroutine

    !> DGEMM through Locus (see locus_gemm).
    subroutine locus_dgemm(context, transa, transb, m, n, k, alpha, a, lda, &
            b, ldb, beta, c, ldc, device, status, record)
        type(locus_context_t), intent(in) :: context
        character, intent(in) :: transa, transb
        integer, intent(in) :: m, n, k, lda, ldb, ldc
        real(c_double), intent(in) :: alpha, beta
        real(c_double), intent(in), target :: a(lda, *), b(ldb, *)
        real(c_double), intent(inout), target :: c(ldc, *)
        type(locus_device_t), intent(in), optional :: device
        integer, intent(out), optional :: status
        type(locus_record_t), intent(out), optional :: record
        call gemm_column_major(context, LOCUS_DTYPE_F64, transa, transb, m, &
            n, k, alpha, c_loc(a), lda, beta, c_loc(b), ldb, c_loc(c), ldc, &
            device, status, record)
    end subroutine

    !> The defaults of locus_conv2d_desc_init (struct_size set for 0.3's
    !> layout); then set the sizes.
    subroutine locus_conv2d_desc_init(desc)
        type(locus_conv2d_desc_t), intent(out) :: desc
        call c_locus_conv2d_desc_init(desc)
    end subroutine

    subroutine locus_conv2d_output_shape(desc, out_height, out_width, status)
        type(locus_conv2d_desc_t), intent(in) :: desc
        integer, intent(out) :: out_height, out_width
        integer, intent(out), optional :: status
        integer(c_size_t) :: p, q
        integer(c_int) :: code
        p = 0
        q = 0
        code = c_locus_conv2d_output_shape(desc, p, q)
        call save_c_error(code)
        out_height = int(p)
        out_width = int(q)
        call finish(code, 'locus_conv2d_output_shape', status)
    end subroutine

    !> locus_conv2d_layer on wrapped arrays. The tensors are in C order:
    !> an NCHW input is a Fortran array x(in_width, in_height,
    !> in_channels, batch) (the last C index varies fastest, so it is the
    !> first Fortran one), the KCRS filter f(kernel_width, kernel_height,
    !> in_channels/groups, out_channels), the output y(out_width,
    !> out_height, out_channels, batch). desc%dtype is taken from the input
    !> buffer. bias: out_channels elements, or absent.
    subroutine locus_conv2d(context, desc, input, filter, output, bias, &
            device, status, record)
        type(locus_context_t), intent(in) :: context
        type(locus_conv2d_desc_t), intent(in) :: desc
        type(locus_buffer_t), intent(in) :: input, filter, output
        type(locus_buffer_t), intent(in), optional :: bias
        type(locus_device_t), intent(in), optional :: device
        integer, intent(out), optional :: status
        type(locus_record_t), intent(out), optional, target :: record
        type(locus_conv2d_desc_t) :: typed
        type(c_ptr) :: bias_ptr
        integer(c_int) :: code
        typed = desc
        typed%dtype = int(input%dtype, c_int)
        bias_ptr = c_null_ptr
        if (present(bias)) bias_ptr = bias%ptr
        code = c_locus_conv2d_layer(context%ptr, device_ptr(device), typed, &
            input%ptr, filter%ptr, bias_ptr, output%ptr, record_ptr(record))
        call save_c_error(code)
        call finish(code, 'locus_conv2d', status)
    end subroutine
end module locus
