! What a user writes: `use locus` and a DGEMM, built against the installed
! module (tests/fortran/test_install.sh).
program consumer
    use locus
    implicit none
    type(locus_context_t) :: context
    double precision, target :: a(2, 2), b(2, 2), c(2, 2)
    a = reshape([1d0, 2d0, 3d0, 4d0], [2, 2])
    b = reshape([5d0, 6d0, 7d0, 8d0], [2, 2])
    c = 0
    call locus_context_create(context)
    call locus_gemm(context, 'N', 'N', 2, 2, 2, 1d0, a, 2, b, 2, 0d0, c, 2)
    call locus_context_destroy(context)
    if (any(c /= matmul(a, b))) error stop 'wrong product'
    write (*, '(a, 4f6.1)') 'consumer: c =', c
end program consumer
