"""pngout.py - where the examples of python/examples write their pictures (PNG, with
matplotlib's Agg backend; Debian's python3-matplotlib).

An example names every file it will write before it starts; `Output` then makes the
directory and checks each name once, so a run never replaces a file it did not make: a file
already there must be a PNG whose tEXt chunk `Software` is this package's mark (one that an
example wrote before). Anything else stops the run with a message naming the file, before
any work is done. Each picture is written to a temporary file in the same directory and
renamed over its name, so a failure never leaves half a file."""
import os
import struct
import sys

MARK = "kern python/examples"     # the start of the Software text of every picture written here
DEFAULT_DIR = "kern-examples"     # under the current directory


class OutputError(Exception):
    pass


def png_software(path):
    """The text of the Software tEXt chunk of the PNG file at path; None when the file is not
    a PNG or has none."""
    with open(path, "rb") as f:
        if f.read(8) != b"\x89PNG\r\n\x1a\n":
            return None
        while True:
            head = f.read(8)
            if len(head) < 8:
                return None
            size, kind = struct.unpack(">I4s", head)
            if kind == b"IDAT" or kind == b"IEND":  # text chunks that matter come first
                return None
            data = f.read(size)
            f.read(4)                               # the CRC
            if kind == b"tEXt" and b"\0" in data:
                key, _, value = data.partition(b"\0")
                if key == b"Software":
                    return value.decode("latin-1")


def _ours(path):
    try:
        text = png_software(path)
    except OSError:
        return False
    return text is not None and text.startswith(MARK)


class Output:
    """The pictures of one example, `names` (file names without a directory) in `directory`."""

    def __init__(self, directory, names, program):
        self.directory = directory
        self.program = program
        if os.path.exists(directory) and not os.path.isdir(directory):
            raise OutputError("%s: not a directory" % directory)
        for name in names:
            path = os.path.join(directory, name)
            if os.path.lexists(path) and (os.path.islink(path) or not os.path.isfile(path)
                                          or not _ours(path)):
                raise OutputError("%s: exists and was not written by a kern example; "
                                  "choose another directory with --out" % path)
        os.makedirs(directory, exist_ok=True)
        self.names = set(names)

    def save(self, fig, name):
        """Writes the matplotlib figure fig as the PNG `name`, returns its path."""
        assert name in self.names, name
        path = os.path.join(self.directory, name)
        tmp = os.path.join(self.directory, ".%s.%d.tmp" % (name, os.getpid()))
        try:
            fig.savefig(tmp, format="png", dpi="figure", metadata={"Software": "%s/%s" % (MARK, self.program)})
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
        return path


def pyplot():
    """matplotlib.pyplot on the Agg backend (files only, no display), or a clear exit."""
    try:
        import matplotlib
    except ImportError:
        sys.exit("this example draws with matplotlib: install python3-matplotlib "
                 "(scripts/setup.sh does), or pass --no-plots")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def output_or_exit(directory, names, program):
    try:
        return Output(directory, names, program)
    except OutputError as e:
        sys.exit("%s: %s" % (program, e))
