/* elfcheck.c - the checks an ELF image passes before a loader sees it: a host shared object
 * before the dynamic loader (rt.h, rt_elf_check) and an AMDGPU code object (gpu.h,
 * rt_hsaco_check); docs/runtime.md, "Loading modules safely".
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
 * initializers): only load modules you trust.
 *
 * An AMDGPU code object (rt_hsaco_check, the code of an `amdgpu` module file) passes the
 * same checks for EM_AMDGPU, and more, since a GPU loader reads its sections and symbols:
 * the HSA OS/ABI; section headers inside the file, and each section's bytes; a dynamic
 * symbol table whose names lie in its string table; notes inside their segment; and per
 * task (and needed sizer) of every kernel a kernel descriptor "kern_<K>__t<t>.kd" of 64
 * bytes in the file whose code entry lies in an executable segment. The notes' metadata
 * (msgpack) is not read. */
#include <elf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu.h"
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

/* Whether [addr, addr + len) lies in the memory of one loadable segment with flags. */
static bool in_segment(const image *im, uint64_t addr, uint64_t len, uint32_t flags) {
    for (int i = 0; i < im->nph; i++) {
        const Elf64_Phdr *p = &im->ph[i];
        if (p->p_type == PT_LOAD && (p->p_flags & flags) == flags && addr >= p->p_vaddr &&
            in_range(addr - p->p_vaddr, len, p->p_memsz))
            return true;
    }
    return false;
}

/* Whether [addr, addr + len) lies in the memory of one loadable segment. */
static bool in_memory(const image *im, uint64_t addr, uint64_t len) {
    return in_segment(im, addr, len, 0);
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

/* The checks of rt_elf_check for an object of machine (the host's, or EM_AMDGPU). */
static bool check_object(image *out, const void *data, size_t size, int machine, char *err,
                         size_t errlen) {
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
    if (eh.e_machine != machine)
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
    *out = im;
    return true;
}

bool rt_elf_check(const void *data, size_t size, char *err, size_t errlen) {
    image im;
    return check_object(&im, data, size, HOST_MACHINE, err, errlen);
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

/* ---- HSACO code objects ------------------------------------------------------------ */

#ifndef ELFOSABI_AMDGPU_HSA
#define ELFOSABI_AMDGPU_HSA 64
#endif

/* A dynamic symbol with its name, for sorting by name. */
typedef struct named_sym {
    const char *name;
    const Elf64_Sym *sym;
} named_sym;

typedef struct hsaco {
    image im;
    const Elf64_Shdr *sh; /* the section headers */
    int nsh;
    const Elf64_Sym *syms; /* the dynamic symbols */
    size_t nsyms;
    named_sym *byname; /* the same, sorted by name */
    const char *str;   /* their string table, strsz bytes ending in a NUL */
    uint64_t strsz;
} hsaco;

/* Section headers inside the file, the bytes of each section too, and the dynamic symbol
 * table with its string table. */
static bool hsaco_sections(hsaco *h, char *err, size_t errlen) {
    Elf64_Ehdr eh;
    memcpy(&eh, h->im.data, sizeof eh);
    if (eh.e_shoff == 0 || eh.e_shnum == 0 || eh.e_shoff % 8 != 0 ||
        eh.e_shentsize != sizeof(Elf64_Shdr) ||
        !in_range(eh.e_shoff, (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr), h->im.size) ||
        eh.e_shstrndx >= eh.e_shnum)
        return bad(err, errlen, "the section headers lie outside the file (truncated?)");
    h->sh = (const Elf64_Shdr *)(h->im.data + eh.e_shoff);
    h->nsh = eh.e_shnum;
    const Elf64_Shdr *dynsym = NULL;
    for (int i = 0; i < h->nsh; i++) {
        const Elf64_Shdr *s = &h->sh[i];
        if (s->sh_type != SHT_NOBITS && !in_range(s->sh_offset, s->sh_size, h->im.size))
            return bad(err, errlen, "a section lies outside the file (truncated?)");
        if (s->sh_link >= (uint32_t)h->nsh)
            return bad(err, errlen, "a section links to a section that does not exist");
        if (s->sh_type == SHT_DYNSYM && !dynsym)
            dynsym = s;
    }
    if (!dynsym)
        return bad(err, errlen, "no dynamic symbol table");
    const Elf64_Shdr *str = &h->sh[dynsym->sh_link];
    if (dynsym->sh_entsize != sizeof(Elf64_Sym) || dynsym->sh_size % sizeof(Elf64_Sym) ||
        dynsym->sh_offset % 8 != 0 || str->sh_type != SHT_STRTAB || str->sh_size == 0 ||
        h->im.data[str->sh_offset + str->sh_size - 1] != '\0')
        return bad(err, errlen, "a malformed dynamic symbol or string table");
    h->syms = (const Elf64_Sym *)(h->im.data + dynsym->sh_offset);
    h->nsyms = dynsym->sh_size / sizeof(Elf64_Sym);
    h->str = (const char *)h->im.data + str->sh_offset;
    h->strsz = str->sh_size;
    for (size_t i = 0; i < h->nsyms; i++)
        if (h->syms[i].st_name >= h->strsz)
            return bad(err, errlen, "a symbol's name lies outside its string table");
    return true;
}

/* Every note of the note segments inside its segment. */
static bool hsaco_notes(const hsaco *h, char *err, size_t errlen) {
    for (int i = 0; i < h->im.nph; i++) {
        const Elf64_Phdr *p = &h->im.ph[i];
        if (p->p_type != PT_NOTE)
            continue;
        uint64_t off = 0;
        while (off < p->p_filesz) {
            Elf64_Nhdr n;
            if (!in_range(off, sizeof n, p->p_filesz))
                return bad(err, errlen, "a malformed note");
            memcpy(&n, h->im.data + p->p_offset + off, sizeof n);
            uint64_t body = ((uint64_t)n.n_namesz + 3) / 4 * 4 + ((uint64_t)n.n_descsz + 3) / 4 * 4;
            if (!in_range(off + sizeof n, body, p->p_filesz))
                return bad(err, errlen, "a note lies outside its segment");
            off += sizeof n + body;
        }
    }
    return true;
}

static int by_name(const void *a, const void *b) {
    return strcmp(((const named_sym *)a)->name, ((const named_sym *)b)->name);
}

/* The defined dynamic symbol named name (NULL when there is none). */
static const Elf64_Sym *hsaco_symbol(const hsaco *h, const char *name) {
    named_sym key = {name, NULL};
    const named_sym *s = bsearch(&key, h->byname, h->nsyms, sizeof *h->byname, by_name);
    return s && s->sym->st_shndx != SHN_UNDEF ? s->sym : NULL;
}

/* The kernel descriptor sym.kd (64 bytes in the file) and the code it enters. */
static bool hsaco_kernel(const hsaco *h, const kern_meta_kernel *mk, const char *what,
                         const char *sym, char *err, size_t errlen) {
    char kd[1100];
    snprintf(kd, sizeof kd, "%s.kd", sym);
    const Elf64_Sym *s = hsaco_symbol(h, kd);
    uint64_t off;
    if (!s || ELF64_ST_TYPE(s->st_info) != STT_OBJECT || s->st_size != 64 ||
        !file_offset(&h->im, s->st_value, 64, &off)) {
        snprintf(err, errlen, "kernel '%s', %s: no kernel descriptor '%s' in the code object",
                 mk->name, what, kd);
        return false;
    }
    int64_t entry; /* kernel_code_entry_byte_offset, from the descriptor */
    memcpy(&entry, h->im.data + off + 16, sizeof entry);
    uint64_t code = s->st_value + (uint64_t)entry;
    if (!in_segment(&h->im, code, 4, PF_X)) {
        snprintf(err, errlen,
                 "kernel '%s', %s: the kernel descriptor '%s' enters code outside the "
                 "executable segment",
                 mk->name, what, kd);
        return false;
    }
    return true;
}

static bool hsaco_kernels(hsaco *h, const kern_meta *meta, char *err, size_t errlen) {
    h->byname = malloc((h->nsyms + 1) * sizeof *h->byname);
    if (!h->byname)
        return bad(err, errlen, "out of host memory to check the code object");
    for (size_t i = 0; i < h->nsyms; i++)
        h->byname[i] = (named_sym){h->str + h->syms[i].st_name, &h->syms[i]};
    qsort(h->byname, h->nsyms, sizeof *h->byname, by_name);
    for (int k = 0; k < meta->nkernels; k++) {
        const kern_meta_kernel *mk = &meta->kernels[k];
        char sym[1024], what[48];
        for (int t = 0; t < mk->ntasks; t++) {
            kern_meta_symbol(sym, sizeof sym, mk->name, t, false);
            snprintf(what, sizeof what, "task %d", t);
            if (!hsaco_kernel(h, mk, what, sym, err, errlen))
                return false;
        }
        for (int s = 0; s < mk->nadstacks; s++) {
            if (!rt_gpu_needs_sizer(mk, s))
                continue;
            kern_meta_sizer_symbol(sym, sizeof sym, mk->name, s);
            snprintf(what, sizeof what, "adstack %d's sizer", s);
            if (!hsaco_kernel(h, mk, what, sym, err, errlen))
                return false;
        }
    }
    return true;
}

bool rt_hsaco_check(const void *code, size_t len, const kern_meta *meta, char *err, size_t errlen) {
    Elf64_Ehdr eh;
    if (len < sizeof eh)
        return bad(err, errlen, "malformed code object: too short for an ELF header");
    memcpy(&eh, code, sizeof eh);
    if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_machine != EM_AMDGPU ||
        eh.e_ident[EI_OSABI] != ELFOSABI_AMDGPU_HSA)
        return bad(err, errlen, "malformed code object: not an AMDGPU HSA ELF file");
    unsigned char *copy = malloc(len); /* aligned (the container's code may be at any offset) */
    if (!copy)
        return bad(err, errlen, "out of host memory to check the code object");
    memcpy(copy, code, len);
    hsaco h = {0};
    char why[400];
    bool ok = check_object(&h.im, copy, len, EM_AMDGPU, why, sizeof why) &&
              hsaco_sections(&h, why, sizeof why) && hsaco_notes(&h, why, sizeof why);
    if (!ok)
        snprintf(err, errlen, "malformed code object: %s", why);
    else
        ok = hsaco_kernels(&h, meta, err, errlen);
    free(h.byname);
    free(copy);
    return ok;
}
