! Without `status`, a failure stops the program with the message on
! stderr (meson checks the nonzero exit: should_fail).
program test_error_stop
    use, intrinsic :: iso_c_binding
    use locus
    implicit none
    type(locus_context_t) :: context
    type(locus_buffer_t) :: buffer
    real(c_float), target :: x(4)
    real(c_double) :: result
    x = 1
    call locus_context_create(context)
    call locus_buffer_wrap(context, x, buffer)
    call locus_reduce(context, buffer, LOCUS_REDUCE_SUM, result, count=5)
    write (*, '(a)') 'FAIL: locus_reduce past the end returned'
end program test_error_stop
