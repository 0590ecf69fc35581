! The bind(c) types of bindings/fortran/locus_c.f90 against the C
! compiler's layout of locus.h (layout_c.c): each struct's size and the
! offsets of its fields (the first of each run of same-typed fields, every
! field whose alignment could move the next one, and the last).
program test_layout
    use, intrinsic :: iso_c_binding
    use locus_c
    implicit none
    interface
        function c_layout(name) bind(c, name='locus_test_c_layout')
            import :: c_char, c_size_t
            character(kind=c_char), intent(in) :: name(*)
            integer(c_size_t) :: c_layout
        end function
    end interface
    type(locus_context_options_t), target :: options
    type(locus_device_info_t), target :: info
    type(locus_estimate_t), target :: estimate
    type(locus_record_t), target :: record
    type(locus_reduce_desc_t), target :: reduce
    type(locus_gemm_desc_t), target :: gemm
    type(locus_conv2d_desc_t), target :: conv
    integer :: failures, checked

    failures = 0
    checked = 0
    call size_is('context_options', c_sizeof(options))
    call at('context_options.device', c_loc(options), c_loc(options%device))
    call at('context_options.cpu_isa', c_loc(options), c_loc(options%cpu_isa))
    call at('context_options.ignore_environment', c_loc(options), &
        c_loc(options%ignore_environment))
    call at('context_options.calibration', c_loc(options), &
        c_loc(options%calibration))
    call size_is('device_info', c_sizeof(info))
    call at('device_info.selector', c_loc(info), c_loc(info%selector))
    call at('device_info.name', c_loc(info), c_loc(info%name))
    call at('device_info.kind', c_loc(info), c_loc(info%kind))
    call at('device_info.nearest_numa_mask', c_loc(info), &
        c_loc(info%nearest_numa_mask))
    call at('device_info.compute_units', c_loc(info), c_loc(info%compute_units))
    call at('device_info.pci_bus_id', c_loc(info), c_loc(info%pci_bus_id))
    call size_is('estimate', c_sizeof(estimate))
    call at('estimate.seconds', c_loc(estimate), c_loc(estimate%seconds))
    call size_is('record', c_sizeof(record))
    call at('record.op', c_loc(record), c_loc(record%op))
    call at('record.algorithm', c_loc(record), c_loc(record%algorithm))
    call at('record.seconds', c_loc(record), c_loc(record%seconds))
    call at('record.bytes', c_loc(record), c_loc(record%bytes))
    call at('record.remote_bytes', c_loc(record), c_loc(record%remote_bytes))
    call at('record.provenance', c_loc(record), c_loc(record%provenance))
    call at('record.chosen_by', c_loc(record), c_loc(record%chosen_by))
    call at('record.estimated_seconds', c_loc(record), &
        c_loc(record%estimated_seconds))
    call at('record.estimate_count', c_loc(record), c_loc(record%estimate_count))
    call at('record.estimates', c_loc(record), c_loc(record%estimates))
    call at('record.dtype', c_loc(record), c_loc(record%dtype))
    call at('record.migrated_bytes', c_loc(record), c_loc(record%migrated_bytes))
    call at('record.migrate_node', c_loc(record), c_loc(record%migrate_node))
    call at('record.buffer_address', c_loc(record), c_loc(record%buffer_address))
    call size_is('reduce_desc', c_sizeof(reduce))
    call at('reduce_desc.dtype', c_loc(reduce), c_loc(reduce%dtype))
    call at('reduce_desc.count', c_loc(reduce), c_loc(reduce%count))
    call at('reduce_desc.allow_atomic', c_loc(reduce), c_loc(reduce%allow_atomic))
    call size_is('gemm_desc', c_sizeof(gemm))
    call at('gemm_desc.trans_b', c_loc(gemm), c_loc(gemm%trans_b))
    call at('gemm_desc.m', c_loc(gemm), c_loc(gemm%m))
    call at('gemm_desc.ldc', c_loc(gemm), c_loc(gemm%ldc))
    call at('gemm_desc.alpha', c_loc(gemm), c_loc(gemm%alpha))
    call at('gemm_desc.math', c_loc(gemm), c_loc(gemm%math))
    call size_is('conv2d_desc', c_sizeof(conv))
    call at('conv2d_desc.dtype', c_loc(conv), c_loc(conv%dtype))
    call at('conv2d_desc.batch', c_loc(conv), c_loc(conv%batch))
    call at('conv2d_desc.pad_w', c_loc(conv), c_loc(conv%pad_w))
    call at('conv2d_desc.algorithm', c_loc(conv), c_loc(conv%algorithm))
    call at('conv2d_desc.math', c_loc(conv), c_loc(conv%math))
    call at('conv2d_desc.groups', c_loc(conv), c_loc(conv%groups))
    call at('conv2d_desc.dilation_w', c_loc(conv), c_loc(conv%dilation_w))
    call at('conv2d_desc.activation', c_loc(conv), c_loc(conv%activation))
    call at('conv2d_desc.output_layout', c_loc(conv), &
        c_loc(conv%output_layout))
    ! struct_size as the C initializers set it is the Fortran size too.
    call c_locus_conv2d_desc_init(conv)
    call same('conv2d_desc struct_size', conv%struct_size, c_sizeof(conv))
    call c_locus_record_init(record)
    call same('record struct_size', record%struct_size, c_sizeof(record))
    if (failures > 0) then
        write (*, '(i0,a)') failures, ' layout mismatch(es)'
        error stop 1
    end if
    write (*, '(i0,a)') checked, ' sizes and offsets agree with C'

contains

    subroutine same(what, fortran, c)
        character(len=*), intent(in) :: what
        integer(c_size_t), intent(in) :: fortran, c
        checked = checked + 1
        if (fortran /= c) then
            write (*, '(a,2(a,i0))') what, ': Fortran ', fortran, ', C ', c
            failures = failures + 1
        end if
    end subroutine

    subroutine size_is(name, fortran)
        character(len=*), intent(in) :: name
        integer(c_size_t), intent(in) :: fortran
        call same('sizeof '//name, fortran, c_layout(name//c_null_char))
    end subroutine

    subroutine at(name, base, field)
        character(len=*), intent(in) :: name
        type(c_ptr), intent(in) :: base, field
        integer(c_intptr_t) :: from, to
        from = transfer(base, from)
        to = transfer(field, to)
        call same('offsetof '//name, int(to - from, c_size_t), &
            c_layout(name//c_null_char))
    end subroutine
end program test_layout
