"""The exceptions: Error and its subclasses (one a kern_status), CopyWarning, and _check,
which turns a failed call's status into the exception with the runtime's message."""

from ._library import _c

class Error(Exception):
    """A failed call of the runtime: the message is the runtime's (kernel, parameter, .kern
    line); `status` is the kern_status name."""

    status = "KERN_ERR"


class ArgumentError(Error, ValueError):
    status = "KERN_ERR_ARGUMENT"


class NotFoundError(Error, LookupError):
    status = "KERN_ERR_NOT_FOUND"


class IOError(Error, OSError):  # noqa: A001 - the runtime's name
    status = "KERN_ERR_IO"


class FormatError(Error, ValueError):
    status = "KERN_ERR_FORMAT"


class CompileError(Error, SyntaxError):
    status = "KERN_ERR_COMPILE"


class UnsupportedError(Error, NotImplementedError):
    status = "KERN_ERR_UNSUPPORTED"


class DeviceError(Error, RuntimeError):
    status = "KERN_ERR_DEVICE"


class OutOfMemoryError(Error, MemoryError):
    status = "KERN_ERR_OUT_OF_MEMORY"


class InternalError(Error, RuntimeError):
    status = "KERN_ERR_INTERNAL"


class CallbackError(Error, RuntimeError):
    """A host step's backward failed (Tape.record_func): Tape.backward raises the
    callback's own exception, with this one (naming the record) as its cause."""
    status = "KERN_ERR_CALLBACK"


class CopyWarning(UserWarning):
    """An argument could not be used in place and was copied (wrong dtype, not contiguous,
    read-only, another device); the message names the kernel and the parameter."""


_ERRORS = {1: ArgumentError, 2: NotFoundError, 3: IOError, 4: FormatError, 5: CompileError,
           6: UnsupportedError, 7: DeviceError, 8: OutOfMemoryError, 9: InternalError,
           10: CallbackError}


def _check(status, ctx_ptr, what=None):
    if status == 0:
        return
    msg = _c["last_error"](ctx_ptr).decode(errors="replace") if ctx_ptr else ""
    if not msg:
        msg = what or "the call failed"
    # the C API's name for the adstack option, in Python's words
    msg = msg.replace("kern_context_options.ad_stack_size = ", "kern.Context(ad_stack_size=")
    if "kern.Context(ad_stack_size=" in msg:
        import re
        msg = re.sub(r"kern\.Context\(ad_stack_size=(\d+)", r"kern.Context(ad_stack_size=\1)", msg)
    raise _ERRORS.get(status, Error)(msg)
