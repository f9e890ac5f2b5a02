/* golden.c - golden-file helpers (see golden.h). */
#include "golden.h"

#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/util.h"

static char *path_of(const char *dir, const char *name) {
    size_t n = strlen(KERN_SOURCE_ROOT) + strlen(dir) + strlen(name) + 32;
    char *p = kern_xmalloc(n);
    snprintf(p, n, "%s/tests/golden/%s/%s", KERN_SOURCE_ROOT, dir, name);
    return p;
}

static int cmp_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int golden_list(const char *dir, const char *ext, char ***names) {
    char *p = path_of(dir, "");
    DIR *d = opendir(p);
    free(p);
    kern_ptrvec v = {0};
    if (d) {
        struct dirent *e;
        size_t el = strlen(ext);
        while ((e = readdir(d))) {
            size_t n = strlen(e->d_name);
            if (n > el && !strcmp(e->d_name + n - el, ext))
                ptrvec_push(&v, strdup(e->d_name));
        }
        closedir(d);
    }
    if (v.len)
        qsort(v.data, (size_t)v.len, sizeof(void *), cmp_names);
    *names = (char **)v.data;
    return v.len;
}

void golden_free_list(char **names, int n) {
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

char *golden_read(const char *dir, const char *name, size_t *len) {
    char *p = path_of(dir, name);
    char *t = kern_read_file(p, len);
    free(p);
    return t;
}

char *golden_sibling(const char *name, const char *ext) {
    const char *dot = strrchr(name, '.');
    size_t base = dot ? (size_t)(dot - name) : strlen(name);
    char *s = kern_xmalloc(base + strlen(ext) + 1);
    memcpy(s, name, base);
    strcpy(s + base, ext);
    return s;
}

static void print_diff(const char *expected, const char *actual) {
    int line = 1;
    const char *e = expected, *a = actual;
    while (*e || *a) {
        const char *ee = strchr(e, '\n'), *ae = strchr(a, '\n');
        size_t el = ee ? (size_t)(ee - e) : strlen(e), al = ae ? (size_t)(ae - a) : strlen(a);
        if (el != al || memcmp(e, a, el) != 0) {
            fprintf(stderr, "  first difference at line %d:\n  expected: %.*s\n  actual:   %.*s\n",
                    line, (int)el, e, (int)al, a);
            return;
        }
        e += el + (ee ? 1 : 0);
        a += al + (ae ? 1 : 0);
        line++;
    }
}

bool golden_check(const char *dir, const char *name, const char *actual) {
    const char *up = getenv("UPDATE");
    if (up && !strcmp(up, "1")) {
        char *p = path_of(dir, name);
        FILE *f = fopen(p, "wb");
        if (f) {
            fputs(actual, f);
            fclose(f);
        }
        free(p);
        return f != NULL;
    }
    size_t len;
    char *expected = golden_read(dir, name, &len);
    if (!expected) {
        fprintf(stderr, "golden %s/%s: expected file missing (UPDATE=1 creates it)\n", dir, name);
        return false;
    }
    bool same = strcmp(expected, actual) == 0;
    if (!same) {
        fprintf(stderr, "golden %s/%s: output differs\n", dir, name);
        print_diff(expected, actual);
    }
    free(expected);
    return same;
}

char *golden_with_type(const char *text, const char *type) {
    static const char *const names[] = {"REAL", "VEC2", "VEC3", "VEC4", "MAT2", "MAT3", "MAT4",
                                        "QUAT"};
    static const char *const f32[] = {"f32", "vec2", "vec3", "vec4", "mat2", "mat3", "mat4",
                                      "quat"};
    static const char *const f64[] = {"f64", "dvec2", "dvec3", "dvec4", "dmat2", "dmat3",
                                      "dmat4", "dquat"};
    const char *const *to = type && !strcmp(type, "f64") ? f64 : f32;
    kern_buf b = {0};
    for (const char *p = text; *p;) {
        bool start = p == text || !(isalnum((unsigned char)p[-1]) || p[-1] == '_');
        int hit = -1;
        for (int k = 0; type && start && k < 8 && hit < 0; k++)
            if (!strncmp(p, names[k], 4) && !(isalnum((unsigned char)p[4]) || p[4] == '_'))
                hit = k;
        if (hit >= 0) {
            buf_puts(&b, hit == 0 ? type : to[hit]);
            p += 4;
        } else {
            buf_putc(&b, *p++);
        }
    }
    return b.data ? b.data : calloc(1, 1);
}
