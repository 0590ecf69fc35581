/* Put before conv_layer.cl in the f64 program: its kernels in double. */
#define LOCUS_CONV_LAYER_F64 1
