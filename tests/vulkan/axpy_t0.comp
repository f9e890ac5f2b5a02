// Task 0 of kernel axpy(a: f32, x: f32[], y: f32[], s: f64[]), hand-written to the SPIR-V
// kernel ABI (docs/spirv-abi.md) for tests/test_vulkan.c: for i in 0..len(x) {
// y[i] = a * x[i] + y[i] } over a grid-stride loop, with a bounds check on y that writes
// the launch's error record (first error wins). Built with glslangValidator -e
// kern_axpy__t0 and linked with task 1 (axpy_t1.comp) into one module.
#version 450
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
layout(local_size_x = 128) in;

layout(std430, set = 0, binding = 0) readonly buffer Block {
    float a;          // offset 0
    int64_t x_n;      // 8: extent 0 of x
    int64_t y_n;      // 16
    int64_t s_n;      // 24
    int64_t ad_slots; // 32
} blk;
layout(std430, set = 0, binding = 1) buffer Err {
    int code;
    uint line;
    uint col;
    int dim;
    int64_t a;
    int64_t b;
} err;
layout(std430, set = 0, binding = 6) readonly buffer X { float data[]; } x; // 5 + param 1
layout(std430, set = 0, binding = 7) buffer Y { float data[]; } y;          // 5 + param 2

void main() {
    int64_t stride = int64_t(gl_NumWorkGroups.x) * 128;
    for (int64_t w = int64_t(gl_GlobalInvocationID.x); w < blk.x_n; w += stride) {
        if (w >= blk.y_n) {
            if (atomicCompSwap(err.code, 0, 1) == 0) { // KERN_DEVERR_BOUNDS at 3:9
                err.line = 3u;
                err.col = 9u;
                err.dim = 0;
                err.a = w;
                err.b = blk.y_n;
            }
            return;
        }
        y.data[uint(w)] = blk.a * x.data[uint(w)] + y.data[uint(w)];
    }
}
