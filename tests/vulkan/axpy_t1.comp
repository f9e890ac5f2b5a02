// Task 1 of kernel axpy (see axpy_t0.comp), serial: s[0] = the sum of y in f64, so it
// sees task 0's writes only if the device orders the tasks (a barrier between them).
#version 450
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
layout(local_size_x = 128) in;

layout(std430, set = 0, binding = 0) readonly buffer Block {
    float a;
    int64_t x_n;
    int64_t y_n;
    int64_t s_n;
    int64_t ad_slots;
} blk;
layout(std430, set = 0, binding = 7) readonly buffer Y { float data[]; } y;
layout(std430, set = 0, binding = 8) buffer S { double data[]; } s; // 5 + param 3

void main() {
    if (gl_GlobalInvocationID.x != 0u) // a serial task runs in invocation 0
        return;
    double acc = 0.0;
    for (int64_t i = 0; i < blk.y_n; i++)
        acc += double(y.data[uint(i)]);
    s.data[0] = acc;
}
