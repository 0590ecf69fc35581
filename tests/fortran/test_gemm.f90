! locus_gemm from Fortran gives what SGEMM and DGEMM would: every
! transpose pair, odd m, n, k, leading dimensions larger than the rows,
! alpha and beta (beta = 0 over NaN in C, alpha = 0), compared with the
! definition summed in extended precision; the rows of C past m (inside
! ldc) must stay as they were.
program test_gemm
    use, intrinsic :: iso_c_binding
    use, intrinsic :: ieee_arithmetic
    use, intrinsic :: iso_fortran_env, only: int64
    use locus
    implicit none
    integer, parameter :: wide = selected_real_kind(p=18)
    type(locus_context_t) :: context
    character, parameter :: flags(2) = ['N', 'T']
    integer :: ia, ib, failures

    call locus_context_create(context)
    failures = 0
    do ia = 1, 2
        do ib = 1, 2
            call check_single(flags(ia), flags(ib), 7, 5, 9, 1.5, 0.5)
            call check_single(flags(ia), flags(ib), 3, 11, 1, -2.0, 0.0)
            call check_single(flags(ia), flags(ib), 6, 1, 13, 0.0, 1.0)
            call check_double(flags(ia), flags(ib), 7, 5, 9, 1.5d0, 0.5d0)
            call check_double(flags(ia), flags(ib), 9, 3, 17, -0.75d0, 0d0)
            call check_double(flags(ia), flags(ib), 1, 8, 4, 0d0, 0d0)
        end do
    end do
    call locus_context_destroy(context)
    if (failures > 0) then
        write (*, '(i0,a)') failures, ' gemm case(s) failed'
        error stop 1
    end if
    write (*, '(a)') 'fortran gemm: f32 and f64, all transposes: ok'

contains

    ! Fills x with values in [-1, 1) from a fixed sequence.
    subroutine fill(x, seed)
        real(wide), intent(out) :: x(:, :)
        integer, intent(inout) :: seed
        integer :: i, j
        do j = 1, size(x, 2)
            do i = 1, size(x, 1)
                ! In 64 bits: the product overflows a default integer.
                seed = int(modulo(int(seed, int64)*48271_int64, 2147483647_int64))
                x(i, j) = real(mod(seed, 2001) - 1000, wide)/1000
            end do
        end do
    end subroutine

    ! The reference: op(A) op(B) with BLAS's beta = 0 and alpha = 0 rules,
    ! and the bound P = |alpha| sum |a b| + |beta c| per element.
    subroutine reference(transa, transb, m, n, k, alpha, a, b, beta, c, &
            expected, bound)
        character, intent(in) :: transa, transb
        integer, intent(in) :: m, n, k
        real(wide), intent(in) :: alpha, beta, a(:, :), b(:, :), c(:, :)
        real(wide), intent(out) :: expected(m, n), bound(m, n)
        real(wide) :: x, y, sum, magnitude
        integer :: i, j, l
        do j = 1, n
            do i = 1, m
                sum = 0
                magnitude = 0
                do l = 1, k
                    if (transa == 'N') then
                        x = a(i, l)
                    else
                        x = a(l, i)
                    end if
                    if (transb == 'N') then
                        y = b(l, j)
                    else
                        y = b(j, l)
                    end if
                    sum = sum + x*y
                    magnitude = magnitude + abs(x*y)
                end do
                expected(i, j) = alpha*sum
                bound(i, j) = abs(alpha)*magnitude
                if (beta /= 0) then
                    expected(i, j) = expected(i, j) + beta*c(i, j)
                    bound(i, j) = bound(i, j) + abs(beta*c(i, j))
                end if
            end do
        end do
    end subroutine

    subroutine shapes(transa, transb, m, n, k, rows_a, cols_a, rows_b, cols_b)
        character, intent(in) :: transa, transb
        integer, intent(in) :: m, n, k
        integer, intent(out) :: rows_a, cols_a, rows_b, cols_b
        rows_a = m
        cols_a = k
        if (transa == 'T') then
            rows_a = k
            cols_a = m
        end if
        rows_b = k
        cols_b = n
        if (transb == 'T') then
            rows_b = n
            cols_b = k
        end if
    end subroutine

    subroutine check_single(transa, transb, m, n, k, alpha, beta)
        character, intent(in) :: transa, transb
        integer, intent(in) :: m, n, k
        real, intent(in) :: alpha, beta
        real(c_float), allocatable, target :: a(:, :), b(:, :), c(:, :)
        real(wide), allocatable :: aw(:, :), bw(:, :), cw(:, :)
        real(wide) :: expected(m, n), bound(m, n)
        integer :: rows_a, cols_a, rows_b, cols_b, seed, status
        call shapes(transa, transb, m, n, k, rows_a, cols_a, rows_b, cols_b)
        ! Leading dimensions larger than the rows: 2, 3 and 4 rows more.
        allocate (aw(rows_a + 2, cols_a), bw(rows_b + 3, cols_b), &
            cw(m + 4, n))
        seed = 7*m + 11*n + 13*k
        call fill(aw, seed)
        call fill(bw, seed)
        call fill(cw, seed)
        a = real(aw, c_float)
        b = real(bw, c_float)
        c = real(cw, c_float)
        aw = a
        bw = b
        cw = c
        if (beta == 0) c(1:m, :) = ieee_value(1.0_c_float, ieee_quiet_nan)
        call reference(transa, transb, m, n, k, real(alpha, wide), aw, bw, &
            real(beta, wide), cw, expected, bound)
        call locus_gemm(context, transa, transb, m, n, k, real(alpha, c_float), &
            a, size(a, 1), b, size(b, 1), real(beta, c_float), c, size(c, 1), &
            status=status)
        call compare('sgemm', transa, transb, m, n, k, status, &
            real(c, wide), cw, expected, bound, 2*(k + 3)*real(epsilon(1.0_c_float), wide)/2)
    end subroutine

    subroutine check_double(transa, transb, m, n, k, alpha, beta)
        character, intent(in) :: transa, transb
        integer, intent(in) :: m, n, k
        double precision, intent(in) :: alpha, beta
        real(c_double), allocatable, target :: a(:, :), b(:, :), c(:, :)
        real(wide), allocatable :: aw(:, :), bw(:, :), cw(:, :)
        real(wide) :: expected(m, n), bound(m, n)
        integer :: rows_a, cols_a, rows_b, cols_b, seed, status
        call shapes(transa, transb, m, n, k, rows_a, cols_a, rows_b, cols_b)
        allocate (aw(rows_a + 1, cols_a), bw(rows_b + 5, cols_b), &
            cw(m + 2, n))
        seed = 3*m + 5*n + 17*k
        call fill(aw, seed)
        call fill(bw, seed)
        call fill(cw, seed)
        a = real(aw, c_double)
        b = real(bw, c_double)
        c = real(cw, c_double)
        aw = a
        bw = b
        cw = c
        if (beta == 0) c(1:m, :) = ieee_value(1.0_c_double, ieee_quiet_nan)
        call reference(transa, transb, m, n, k, real(alpha, wide), aw, bw, &
            real(beta, wide), cw, expected, bound)
        call locus_gemm(context, transa, transb, m, n, k, alpha, a, size(a, 1), &
            b, size(b, 1), beta, c, size(c, 1), status=status)
        call compare('dgemm', transa, transb, m, n, k, status, &
            real(c, wide), cw, expected, bound, 2*(k + 4)*real(epsilon(1.0_c_double), wide)/2)
    end subroutine

    ! got holds the whole C array (with its rows past m), before the C
    ! given, expected and bound its m x n part.
    subroutine compare(what, transa, transb, m, n, k, status, got, before, &
            expected, bound, unit_bound)
        character(len=*), intent(in) :: what
        character, intent(in) :: transa, transb
        integer, intent(in) :: m, n, k, status
        real(wide), intent(in) :: got(:, :), before(:, :), expected(:, :), &
            bound(:, :), unit_bound
        integer :: i, j
        if (status /= LOCUS_SUCCESS) then
            write (*, '(5a)') what, ' ', transa, transb, ': '//locus_last_error()
            failures = failures + 1
            return
        end if
        do j = 1, n
            do i = 1, size(got, 1)
                if (i > m) then
                    if (got(i, j) /= before(i, j)) then
                        write (*, '(a,1x,2a,a,2(1x,i0))') what, transa, &
                            transb, ': wrote past m in C at', i, j
                        failures = failures + 1
                        return
                    end if
                else if (ieee_is_nan(got(i, j)) .or. abs(got(i, j) - &
                        expected(i, j)) > unit_bound*bound(i, j)) then
                    write (*, '(a,1x,2a,a,5(1x,i0),2(1x,es24.16))') what, &
                        transa, transb, ': m n k i j', m, n, k, i, j, &
                        got(i, j), expected(i, j)
                    failures = failures + 1
                    return
                end if
            end do
        end do
    end subroutine
end program test_gemm
