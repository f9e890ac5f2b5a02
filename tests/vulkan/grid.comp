// Kernel grid(out: u32[]), with or without one i32 adstack, for tests/test_vulkan.c: records the
// grid it ran on (out[0]: threads, out[1]: invocations, out[2]: the block's ad_slots) and
// writes entry 0 of its adstack for its slot w (w + 1, at heap byte ad_off + w * 4 of the
// slot-major layout) through the 32-bit heap view (binding 3).
#version 450
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
layout(local_size_x = 128) in;

layout(std430, set = 0, binding = 0) readonly buffer Block {
    int64_t out_n;    // 0
    int64_t ad_slots; // 8
    int64_t ad_off;   // 16: adstack 0's offset in the heap
    int64_t ad_cap;   // 24
} blk;
layout(std430, set = 0, binding = 3) buffer Heap32 { uint data[]; } heap;
layout(std430, set = 0, binding = 5) buffer Out { uint data[]; } o;

void main() {
    uint w = gl_GlobalInvocationID.x;
    atomicMax(o.data[0], gl_NumWorkGroups.x * 128u);
    atomicAdd(o.data[1], 1u);
    atomicMax(o.data[2], uint(blk.ad_slots));
    if (blk.ad_slots > 0) { // the kernel has its adstack (else the block ends before ad_off)
        if (int64_t(w) < blk.ad_slots)
            heap.data[uint(blk.ad_off / 4) + w] = w + 1u;
    }
}
