// Kernel scal(b: bool, i: i32, u: u32, l: i64, f: f32, d: f64, m: i64[,], out: f64[])
// for tests/test_vulkan.c: copies every launch-block value to out[0..9] as f64, so the
// test checks the runtime's block against this std430 declaration (docs/spirv-abi.md).
#version 450
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
layout(local_size_x = 128) in;

layout(std430, set = 0, binding = 0) readonly buffer Block {
    uint b;           // 0: bool as u32
    int i;            // 4
    uint u;           // 8
    int64_t l;        // 16
    float f;          // 24
    double d;         // 32
    int64_t m_n0;     // 40
    int64_t m_n1;     // 48
    int64_t out_n;    // 56
    int64_t ad_slots; // 64
} blk;
layout(std430, set = 0, binding = 12) buffer Out { double data[]; } o; // 5 + param 7

void main() {
    if (gl_GlobalInvocationID.x != 0u)
        return;
    o.data[0] = double(blk.b);
    o.data[1] = double(blk.i);
    o.data[2] = double(blk.u);
    o.data[3] = double(blk.l);
    o.data[4] = double(blk.f);
    o.data[5] = blk.d;
    o.data[6] = double(blk.m_n0);
    o.data[7] = double(blk.m_n1);
    o.data[8] = double(blk.out_n);
    o.data[9] = double(blk.ad_slots);
}
