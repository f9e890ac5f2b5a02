"""paths.py PREFIX MESON_SITE LIBRARY - where `meson install` puts the kern package, and
how the package finds libkern-jit from there (python/install/meson.build runs it with the
interpreter it installs for).

PREFIX is meson's prefix, MESON_SITE the site-packages directory meson's python module
chose, LIBRARY the installed libkern-jit's absolute path. Prints two lines:

  1. the directory that receives the package: MESON_SITE, unless this interpreter does
     not search it and does search a site directory under PREFIX, which then wins. Meson
     1.0 gives Debian's PREFIX/lib/python3/dist-packages for every prefix, but Debian's
     python3 reads that directory only under /usr; under the default prefix /usr/local it
     reads /usr/local/lib/python3.X/dist-packages;
  2. LIBRARY relative to the package's own directory (SITE/kern), so that the package
     finds its library after a staged (DESTDIR) install or a move of the whole prefix."""
import os
import site
import sys

prefix, meson_site, library = (os.path.normpath(a) for a in sys.argv[1:4])
# not sys.path: PYTHONPATH is the configuring user's
searched = [os.path.normpath(d) for d in site.getsitepackages()]
site_dir = meson_site
if meson_site not in searched:
    under = [d for d in searched if os.path.commonpath([d, prefix]) == prefix]
    if under:
        site_dir = under[0]
print(site_dir)
print(os.path.relpath(library, os.path.join(site_dir, "kern")))
