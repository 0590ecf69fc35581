! The C API of include/locus/locus.h as bind(c) types and interfaces, for
! the module locus (locus.f90) and its layout test; applications use
! locus. Every derived type here mirrors a C struct field for field
! (enums are C int, size_t is c_size_t, uint64_t c_int64_t, char[N]
! N characters): tests/fortran/test_layout checks each size and offset
! against the C compiler's. A field appended to one of these structs in
! locus.h must be appended here in the same place.
module locus_c
    use, intrinsic :: iso_c_binding
    implicit none
    private

    integer, parameter, public :: locus_record_max_estimates = 8

    type, bind(c), public :: locus_context_options_t
        integer(c_size_t) :: struct_size = 0
        type(c_ptr) :: device = c_null_ptr
        type(c_ptr) :: backends = c_null_ptr
        type(c_ptr) :: threads = c_null_ptr
        type(c_ptr) :: numa = c_null_ptr
        type(c_ptr) :: strict = c_null_ptr
        type(c_ptr) :: log = c_null_ptr
        type(c_ptr) :: record = c_null_ptr
        type(c_ptr) :: topology = c_null_ptr
        type(c_ptr) :: plugin_path = c_null_ptr
        type(c_ptr) :: cpu_isa = c_null_ptr
        integer(c_int) :: ignore_environment = 0
        type(c_ptr) :: calibration = c_null_ptr
    end type

    type, bind(c), public :: locus_device_info_t
        integer(c_size_t) :: struct_size = 0
        character(kind=c_char) :: selector(32) = c_null_char
        character(kind=c_char) :: backend(16) = c_null_char
        character(kind=c_char) :: name(128) = c_null_char
        character(kind=c_char) :: vendor(64) = c_null_char
        character(kind=c_char) :: version(64) = c_null_char
        integer(c_int) :: kind = 0
        integer(c_int64_t) :: nearest_numa_mask = 0
        integer(c_int64_t) :: memory_bytes = 0
        integer(c_int) :: compute_units = 0
        integer(c_int) :: index_in_backend = 0
        character(kind=c_char) :: pci_bus_id(16) = c_null_char
    end type

    type, bind(c), public :: locus_estimate_t
        character(kind=c_char) :: device(32) = c_null_char
        real(c_double) :: seconds = 0
    end type

    !> What one operation did and cost (locus_record): op, device and
    !> algorithm names, wall time, flops, bytes moved and the rest. The
    !> character fields are C strings; locus_string turns one into a
    !> Fortran string.
    type, bind(c), public :: locus_record_t
        integer(c_size_t) :: struct_size = 0
        character(kind=c_char) :: op(16) = c_null_char
        character(kind=c_char) :: device(32) = c_null_char
        character(kind=c_char) :: algorithm(32) = c_null_char
        real(c_double) :: seconds = 0
        real(c_double) :: flops = 0
        integer(c_int64_t) :: bytes = 0
        integer(c_int64_t) :: bytes_to_device = 0
        integer(c_int64_t) :: bytes_from_device = 0
        integer(c_int64_t) :: workspace_bytes = 0
        integer(c_int64_t) :: local_bytes = 0
        integer(c_int64_t) :: remote_bytes = 0
        integer(c_int) :: provenance = 0
        character(kind=c_char) :: chosen_by(16) = c_null_char
        real(c_double) :: estimated_seconds = 0
        integer(c_size_t) :: estimate_count = 0
        type(locus_estimate_t) :: estimates(locus_record_max_estimates)
        character(kind=c_char) :: dtype(8) = c_null_char
        integer(c_int64_t) :: migrated_bytes = 0
        real(c_double) :: migrate_seconds = 0
        integer(c_int) :: migrate_node = 0
        integer(c_int64_t) :: buffer_id = 0
        integer(c_int64_t) :: buffer_address = 0
    end type

    type, bind(c), public :: locus_reduce_desc_t
        integer(c_size_t) :: struct_size = 0
        integer(c_int) :: dtype = 0
        integer(c_int) :: op = 0
        integer(c_size_t) :: count = 0
        integer(c_int) :: allow_atomic = 0
    end type

    type, bind(c), public :: locus_gemm_desc_t
        integer(c_size_t) :: struct_size = 0
        integer(c_int) :: dtype = 0
        integer(c_int) :: trans_a = 0
        integer(c_int) :: trans_b = 0
        integer(c_size_t) :: m = 0, n = 0, k = 0
        integer(c_size_t) :: lda = 0, ldb = 0, ldc = 0
        real(c_double) :: alpha = 0
        real(c_double) :: beta = 0
        integer(c_int) :: math = 0
    end type

    !> locus_conv2d_desc of Locus 0.3. Set it up with locus_conv2d_desc_init
    !> (which sets struct_size and the defaults), then the fields. Sizes are
    !> counts of the C API (batch, channels, height, width); the arrays are
    !> in C order (see locus_conv2d in locus.f90).
    type, bind(c), public :: locus_conv2d_desc_t
        integer(c_size_t) :: struct_size = 0
        integer(c_int) :: dtype = 0
        integer(c_size_t) :: batch = 0
        integer(c_size_t) :: in_channels = 0, in_height = 0, in_width = 0
        integer(c_size_t) :: out_channels = 0, kernel_height = 0
        integer(c_size_t) :: kernel_width = 0
        integer(c_size_t) :: stride_h = 0, stride_w = 0
        integer(c_size_t) :: pad_h = 0, pad_w = 0
        integer(c_int) :: algorithm = 0
        integer(c_int) :: math = 0
        integer(c_size_t) :: groups = 0
        integer(c_size_t) :: pad_bottom = 0, pad_right = 0
        integer(c_size_t) :: dilation_h = 0, dilation_w = 0
        integer(c_int) :: activation = 0
        integer(c_int) :: input_layout = 0, output_layout = 0
    end type

    public :: c_locus_status_str, c_locus_last_error, c_strlen
    public :: c_locus_context_options_init, c_locus_context_create
    public :: c_locus_context_destroy, c_locus_device_count
    public :: c_locus_device_get, c_locus_device_find
    public :: c_locus_device_info_init, c_locus_device_get_info
    public :: c_locus_buffer_wrap, c_locus_buffer_destroy
    public :: c_locus_record_init, c_locus_record_to_json
    public :: c_locus_reduce_desc_init, c_locus_reduce
    public :: c_locus_gemm_desc_init, c_locus_gemm
    public :: c_locus_conv2d_desc_init, c_locus_conv2d_output_shape
    public :: c_locus_conv2d_layer

    interface
        function c_strlen(s) bind(c, name='strlen')
            import :: c_ptr, c_size_t
            type(c_ptr), value :: s
            integer(c_size_t) :: c_strlen
        end function
        function c_locus_status_str(status) bind(c, name='locus_status_str')
            import :: c_ptr, c_int
            integer(c_int), value :: status
            type(c_ptr) :: c_locus_status_str
        end function
        function c_locus_last_error() bind(c, name='locus_last_error')
            import :: c_ptr
            type(c_ptr) :: c_locus_last_error
        end function
        subroutine c_locus_context_options_init(options) &
                bind(c, name='locus_context_options_init')
            import :: locus_context_options_t
            type(locus_context_options_t), intent(inout) :: options
        end subroutine
        function c_locus_context_create(options, out) &
                bind(c, name='locus_context_create')
            import :: locus_context_options_t, c_ptr, c_int
            type(locus_context_options_t), intent(in) :: options
            type(c_ptr), intent(out) :: out
            integer(c_int) :: c_locus_context_create
        end function
        function c_locus_context_destroy(context) &
                bind(c, name='locus_context_destroy')
            import :: c_ptr, c_int
            type(c_ptr), value :: context
            integer(c_int) :: c_locus_context_destroy
        end function
        function c_locus_device_count(context, count) &
                bind(c, name='locus_device_count')
            import :: c_ptr, c_int, c_size_t
            type(c_ptr), value :: context
            integer(c_size_t), intent(out) :: count
            integer(c_int) :: c_locus_device_count
        end function
        function c_locus_device_get(context, index, out) &
                bind(c, name='locus_device_get')
            import :: c_ptr, c_int, c_size_t
            type(c_ptr), value :: context
            integer(c_size_t), value :: index
            type(c_ptr), intent(out) :: out
            integer(c_int) :: c_locus_device_get
        end function
        function c_locus_device_find(context, selector, out) &
                bind(c, name='locus_device_find')
            import :: c_ptr, c_int, c_char
            type(c_ptr), value :: context
            character(kind=c_char), intent(in) :: selector(*)
            type(c_ptr), intent(out) :: out
            integer(c_int) :: c_locus_device_find
        end function
        subroutine c_locus_device_info_init(info) &
                bind(c, name='locus_device_info_init')
            import :: locus_device_info_t
            type(locus_device_info_t), intent(inout) :: info
        end subroutine
        function c_locus_device_get_info(device, info) &
                bind(c, name='locus_device_get_info')
            import :: c_ptr, c_int, locus_device_info_t
            type(c_ptr), value :: device
            type(locus_device_info_t), intent(inout) :: info
            integer(c_int) :: c_locus_device_get_info
        end function
        function c_locus_buffer_wrap(context, memory, bytes, out) &
                bind(c, name='locus_buffer_wrap')
            import :: c_ptr, c_int, c_size_t
            type(c_ptr), value :: context, memory
            integer(c_size_t), value :: bytes
            type(c_ptr), intent(out) :: out
            integer(c_int) :: c_locus_buffer_wrap
        end function
        subroutine c_locus_buffer_destroy(buffer) &
                bind(c, name='locus_buffer_destroy')
            import :: c_ptr
            type(c_ptr), value :: buffer
        end subroutine
        subroutine c_locus_record_init(record) bind(c, name='locus_record_init')
            import :: locus_record_t
            type(locus_record_t), intent(inout) :: record
        end subroutine
        function c_locus_record_to_json(record, text, capacity) &
                bind(c, name='locus_record_to_json')
            import :: locus_record_t, c_ptr, c_size_t
            type(locus_record_t), intent(in) :: record
            type(c_ptr), value :: text
            integer(c_size_t), value :: capacity
            integer(c_size_t) :: c_locus_record_to_json
        end function
        subroutine c_locus_reduce_desc_init(desc) &
                bind(c, name='locus_reduce_desc_init')
            import :: locus_reduce_desc_t
            type(locus_reduce_desc_t), intent(inout) :: desc
        end subroutine
        function c_locus_reduce(context, device, desc, x, result, record) &
                bind(c, name='locus_reduce')
            import :: c_ptr, c_int, c_double, locus_reduce_desc_t
            type(c_ptr), value :: context, device
            type(locus_reduce_desc_t), intent(in) :: desc
            type(c_ptr), value :: x
            real(c_double), intent(out) :: result
            type(c_ptr), value :: record
            integer(c_int) :: c_locus_reduce
        end function
        subroutine c_locus_gemm_desc_init(desc) &
                bind(c, name='locus_gemm_desc_init')
            import :: locus_gemm_desc_t
            type(locus_gemm_desc_t), intent(inout) :: desc
        end subroutine
        function c_locus_gemm(context, device, desc, a, b, c, record) &
                bind(c, name='locus_gemm')
            import :: c_ptr, c_int, locus_gemm_desc_t
            type(c_ptr), value :: context, device
            type(locus_gemm_desc_t), intent(in) :: desc
            type(c_ptr), value :: a, b, c, record
            integer(c_int) :: c_locus_gemm
        end function
        subroutine c_locus_conv2d_desc_init(desc) &
                bind(c, name='locus_conv2d_desc_init')
            import :: locus_conv2d_desc_t
            type(locus_conv2d_desc_t), intent(inout) :: desc
        end subroutine
        function c_locus_conv2d_output_shape(desc, out_height, out_width) &
                bind(c, name='locus_conv2d_output_shape')
            import :: locus_conv2d_desc_t, c_int, c_size_t
            type(locus_conv2d_desc_t), intent(in) :: desc
            integer(c_size_t), intent(out) :: out_height, out_width
            integer(c_int) :: c_locus_conv2d_output_shape
        end function
        function c_locus_conv2d_layer(context, device, desc, input, filter, &
                bias, output, record) bind(c, name='locus_conv2d_layer')
            import :: c_ptr, c_int, locus_conv2d_desc_t
            type(c_ptr), value :: context, device
            type(locus_conv2d_desc_t), intent(in) :: desc
            type(c_ptr), value :: input, filter, bias, output, record
            integer(c_int) :: c_locus_conv2d_layer
        end function
    end interface
end module locus_c
