/* elfcheck.c - the checks a module file passes before the dynamic loader sees it
 * (rt.h, rt_elf_check; docs/runtime.md "Loading modules safely").
 *
 * glibc's loader trusts the file: a truncated shared object, or one whose program headers
 * or dynamic section point outside it, crashes the host process inside dlopen instead of
 * failing. So the image is read whole and checked first, with every offset and size taken
 * as hostile: an ELF64 shared object of the host's machine and byte order; program headers
 * inside the file; every loadable segment's bytes inside the file; a dynamic section inside
 * the file and a loadable segment; every address the dynamic section gives (string and
 * symbol tables, hash tables, relocations, init and fini arrays, versions) inside the
 * memory of a loadable segment, with its size; every relocation's target inside one too.
 * What passes may still be a hostile program (a module is code, loading runs its
 * initializers): only load modules you trust. */
#include <elf.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "rt.h"

#if defined(__x86_64__)
#define HOST_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define HOST_MACHINE EM_AARCH64
#elif defined(__riscv)
#define HOST_MACHINE EM_RISCV
#else
#define HOST_MACHINE EM_NONE
#endif

typedef struct image {
    const unsigned char *data;
    size_t size;
    const Elf64_Phdr *ph;
    int nph;
} image;

/* Whether [off, off + len) lies inside n bytes, without overflow. */
static bool in_range(uint64_t off, uint64_t len, uint64_t n) { return off <= n && len <= n - off; }

/* Whether [addr, addr + len) lies in the memory of one loadable segment. */
static bool in_memory(const image *im, uint64_t addr, uint64_t len) {
    for (int i = 0; i < im->nph; i++) {
        const Elf64_Phdr *p = &im->ph[i];
        if (p->p_type == PT_LOAD && addr >= p->p_vaddr &&
            in_range(addr - p->p_vaddr, len, p->p_memsz))
            return true;
    }
    return false;
}

/* The file offset of [addr, addr + len) when it lies in one segment's file bytes. */
static bool file_offset(const image *im, uint64_t addr, uint64_t len, uint64_t *off) {
    for (int i = 0; i < im->nph; i++) {
        const Elf64_Phdr *p = &im->ph[i];
        if (p->p_type == PT_LOAD && addr >= p->p_vaddr &&
            in_range(addr - p->p_vaddr, len, p->p_filesz)) {
            *off = p->p_offset + (addr - p->p_vaddr);
            return true;
        }
    }
    return false;
}

static bool bad(char *err, size_t errlen, const char *what) {
    snprintf(err, errlen, "%s", what);
    return false;
}

/* The relocation table at addr of size bytes: every entry's target in memory. */
static bool check_relocs(const image *im, uint64_t addr, uint64_t size, char *err, size_t errlen) {
    if (size == 0)
        return true;
    uint64_t off;
    if (size % sizeof(Elf64_Rela) || !file_offset(im, addr, size, &off))
        return bad(err, errlen, "a relocation table lies outside the file");
    for (uint64_t i = 0; i < size / sizeof(Elf64_Rela); i++) {
        Elf64_Rela r;
        memcpy(&r, im->data + off + i * sizeof r, sizeof r);
        if (ELF64_R_TYPE(r.r_info) != 0 && !in_memory(im, r.r_offset, 8))
            return bad(err, errlen, "a relocation writes outside the module's memory");
    }
    return true;
}

bool rt_elf_check(const void *data, size_t size, char *err, size_t errlen) {
    image im = {data, size, NULL, 0};
    if ((uintptr_t)data % 8 != 0)
        return bad(err, errlen, "the image is not aligned in memory");
    Elf64_Ehdr eh;
    if (size < sizeof eh)
        return bad(err, errlen, "the file is too short for an ELF header");
    memcpy(&eh, data, sizeof eh);
    if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0)
        return bad(err, errlen, "not an ELF file");
    if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB ||
        eh.e_ident[EI_VERSION] != EV_CURRENT)
        return bad(err, errlen, "not a 64-bit little-endian ELF file");
    if (eh.e_type != ET_DYN)
        return bad(err, errlen, "not a shared object");
    if (eh.e_machine != HOST_MACHINE)
        return bad(err, errlen, "a shared object for another machine");
    if (eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum == 0 || eh.e_phnum == PN_XNUM ||
        !in_range(eh.e_phoff, (uint64_t)eh.e_phnum * sizeof(Elf64_Phdr), size) ||
        eh.e_phoff % 8 != 0)
        return bad(err, errlen, "the program headers lie outside the file (truncated?)");
    if (eh.e_shoff != 0 && (eh.e_shentsize != sizeof(Elf64_Shdr) ||
                            !in_range(eh.e_shoff, (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr), size)))
        return bad(err, errlen, "the section headers lie outside the file (truncated?)");
    im.ph = (const Elf64_Phdr *)((const unsigned char *)data + eh.e_phoff);
    im.nph = eh.e_phnum;
    const Elf64_Phdr *dyn = NULL;
    int nload = 0;
    for (int i = 0; i < im.nph; i++) {
        const Elf64_Phdr *p = &im.ph[i];
        if (p->p_type == PT_LOAD) {
            nload++;
            if (!in_range(p->p_offset, p->p_filesz, size))
                return bad(err, errlen, "a loadable segment lies outside the file (truncated?)");
            if (p->p_filesz > p->p_memsz || p->p_memsz > ((uint64_t)1 << 40) ||
                p->p_vaddr > ((uint64_t)1 << 46))
                return bad(err, errlen, "a loadable segment has impossible sizes");
            if (p->p_align > 1 && ((p->p_align & (p->p_align - 1)) != 0 ||
                                   (p->p_vaddr - p->p_offset) % p->p_align != 0))
                return bad(err, errlen, "a loadable segment is misaligned");
        } else if (p->p_type == PT_DYNAMIC) {
            if (dyn)
                return bad(err, errlen, "two dynamic sections");
            dyn = p;
        } else if (p->p_type == PT_TLS || p->p_type == PT_INTERP) {
            return bad(err, errlen, "a module has no thread-local storage or interpreter");
        }
        if (p->p_type != PT_LOAD && p->p_filesz && !in_range(p->p_offset, p->p_filesz, size))
            return bad(err, errlen, "a segment lies outside the file (truncated?)");
    }
    if (nload == 0)
        return bad(err, errlen, "no loadable segment");
    if (!dyn)
        return bad(err, errlen, "no dynamic section");
    uint64_t doff;
    if (dyn->p_filesz % sizeof(Elf64_Dyn) || dyn->p_filesz == 0 ||
        !in_range(dyn->p_offset, dyn->p_filesz, size) ||
        !file_offset(&im, dyn->p_vaddr, dyn->p_filesz, &doff) || doff != dyn->p_offset)
        return bad(err, errlen, "the dynamic section lies outside the file (truncated?)");
    /* the dynamic section: addresses with their sizes, where the format gives them */
    uint64_t v[DT_NUM] = {0};
    bool has[DT_NUM] = {false}, ended = false;
    uint64_t gnu_hash = 0, versym = 0, verdef = 0, verneed = 0;
    uint64_t n = dyn->p_filesz / sizeof(Elf64_Dyn);
    for (uint64_t i = 0; i < n && !ended; i++) {
        Elf64_Dyn d;
        memcpy(&d, (const unsigned char *)data + dyn->p_offset + i * sizeof d, sizeof d);
        if (d.d_tag == DT_NULL)
            ended = true;
        else if (d.d_tag > 0 && d.d_tag < DT_NUM) {
            v[d.d_tag] = d.d_un.d_val;
            has[d.d_tag] = true;
        } else if (d.d_tag == DT_GNU_HASH)
            gnu_hash = d.d_un.d_ptr;
        else if (d.d_tag == DT_VERSYM)
            versym = d.d_un.d_ptr;
        else if (d.d_tag == DT_VERDEF)
            verdef = d.d_un.d_ptr;
        else if (d.d_tag == DT_VERNEED)
            verneed = d.d_un.d_ptr;
    }
    if (!ended)
        return bad(err, errlen, "the dynamic section has no end");
    if (!has[DT_STRTAB] || !has[DT_SYMTAB] || !has[DT_STRSZ])
        return bad(err, errlen, "no dynamic symbol or string table");
    if (!in_memory(&im, v[DT_STRTAB], v[DT_STRSZ]) || !in_memory(&im, v[DT_SYMTAB], 1))
        return bad(err, errlen, "the dynamic symbol or string table lies outside the module");
    if (has[DT_SYMENT] && v[DT_SYMENT] != sizeof(Elf64_Sym))
        return bad(err, errlen, "a symbol table of the wrong entry size");
    if (has[DT_NEEDED] && v[DT_NEEDED] >= v[DT_STRSZ])
        return bad(err, errlen, "a needed library's name lies outside the string table");
    const uint64_t ptrs[] = {has[DT_HASH] ? v[DT_HASH] : 0, gnu_hash, versym, verdef, verneed};
    for (size_t i = 0; i < sizeof ptrs / sizeof *ptrs; i++)
        if (ptrs[i] && !in_memory(&im, ptrs[i], 8))
            return bad(err, errlen, "a dynamic table lies outside the module");
    static const int arrays[][2] = {{DT_INIT_ARRAY, DT_INIT_ARRAYSZ},
                                    {DT_FINI_ARRAY, DT_FINI_ARRAYSZ},
                                    {DT_PREINIT_ARRAY, DT_PREINIT_ARRAYSZ}};
    for (size_t i = 0; i < sizeof arrays / sizeof *arrays; i++)
        if ((has[arrays[i][0]] || has[arrays[i][1]]) &&
            !in_memory(&im, v[arrays[i][0]], v[arrays[i][1]]))
            return bad(err, errlen, "an init or fini array lies outside the module");
    if ((has[DT_INIT] && !in_memory(&im, v[DT_INIT], 1)) ||
        (has[DT_FINI] && !in_memory(&im, v[DT_FINI], 1)))
        return bad(err, errlen, "an init or fini function lies outside the module");
    if (has[DT_REL] || has[DT_RELSZ])
        return bad(err, errlen, "REL relocations in a 64-bit module");
    if (has[DT_RELA] != has[DT_RELASZ] || (has[DT_RELAENT] && v[DT_RELAENT] != sizeof(Elf64_Rela)))
        return bad(err, errlen, "a malformed relocation table");
    if (has[DT_JMPREL] != has[DT_PLTRELSZ] || (has[DT_PLTREL] && v[DT_PLTREL] != DT_RELA))
        return bad(err, errlen, "a malformed PLT relocation table");
    if (has[DT_RELA] && !check_relocs(&im, v[DT_RELA], v[DT_RELASZ], err, errlen))
        return false;
    if (has[DT_JMPREL] && !check_relocs(&im, v[DT_JMPREL], v[DT_PLTRELSZ], err, errlen))
        return false;
    return true;
}

bool rt_elf_in_memory(const void *data, size_t size, uint64_t vaddr, uint64_t len) {
    Elf64_Ehdr eh;
    if (size < sizeof eh)
        return false;
    memcpy(&eh, data, sizeof eh);
    if (!in_range(eh.e_phoff, (uint64_t)eh.e_phnum * sizeof(Elf64_Phdr), size) ||
        eh.e_phoff % 8 != 0 || (uintptr_t)data % 8 != 0)
        return false;
    image im = {data, size, (const Elf64_Phdr *)((const unsigned char *)data + eh.e_phoff),
                eh.e_phnum};
    return in_memory(&im, vaddr, len);
}
