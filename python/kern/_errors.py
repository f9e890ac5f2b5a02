"""The exceptions: Error and its subclasses (one a kern_status), CopyWarning, and _check,
which turns a failed call's status into the exception with the runtime's message."""

import re

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


_STATUS_NAMES = {1: "KERN_ERR_ARGUMENT", 2: "KERN_ERR_NOT_FOUND", 3: "KERN_ERR_IO",
                 4: "KERN_ERR_FORMAT", 5: "KERN_ERR_COMPILE", 6: "KERN_ERR_UNSUPPORTED",
                 7: "KERN_ERR_DEVICE", 8: "KERN_ERR_OUT_OF_MEMORY", 9: "KERN_ERR_INTERNAL",
                 10: "KERN_ERR_CALLBACK"}

# The C API's names in the runtime's messages, in the words of the package: a message
# starts with the C function that failed ("kern_tape_grad: ..."), which becomes the Python
# call (_check's what), and may name others ("kern_tape_clear starts a new recording").
_C_WORDS = {
    "kern_tape_create_forward": "kern.Tape(forward=True)",
    "kern_tape_create": "kern.Tape()",
    "kern_tape_set_grad": "tape.backward(seeds=...)",
    "kern_tape_grad": "tape.grad",
    "kern_tape_set_tan": "tape.set_tangent",
    "kern_tape_tan": "tape.tangent",
    "kern_tape_clear": "tape.reset()",
    "kern_tape_zero": "tape.zero()",
    "kern_tape_backward": "tape.backward()",
    "kern_tape_record_func": "tape.record_func",
    "kern_tape_scalar_grad": "tape.scalar_grad",
    "kern_tape_launch_jvp": "a call on a forward tape",
    "kern_tape_launch": "a call on a tape",
    "kern_tape_destroy": "tape.release()",
    "kern_buffer_create": "kern.Buffer",
    "kern_buffer_wrap": "an array used in place",
    "kern_buffer_from_dlpack": "a DLPack tensor used in place",
    "kern_buffer_to_dlpack": "Buffer.__dlpack__",
    "kern_buffer_read": "Buffer.read",
    "kern_buffer_write": "Buffer.write",
    "kern_launch": "a kernel call",
    "kern_sync": "Context.synchronize",
    "kern_module_load_file": "kern.load",
    "kern_module_from_source": "kern.compile",
    "kern_module_from_file_source": "kern.compile",
    "kern_kernel_find": "Module.kernel",
    "kern_kernel_param_count": "Kernel.params",
    "kern_kernel_param_written": "Kernel.params",
    "kern_kernel_param": "Kernel.param",
    "kern_tape_error": "the host step's error",
    "kern_tape_record_count": "tape.records",
    "kern_tape_saved_bytes": "tape.saved_bytes",
    "kern_buffer_release": "Buffer.release()",
    "kern_buffer_pointer": "Buffer.numpy",
    "kern_module_release": "Module.release()",
    "kern_context_release": "Context.release()",
    "kern_context_create": "kern.Context",
    "kern_context_adstack_info": "Context.adstack_info",
    "kern_context_device_name": "Context.device_name",
    "kern_context_cuda_stream": "Context.cuda_stream",
    "kern_context_options": "kern.Context options",
}
_C_PREFIX = re.compile(r"kern_\w+: ")
_C_NAME = re.compile(r"\bkern_\w+")


def _python_words(msg, what=None):
    """A runtime message in the package's words: the C function it starts with replaced by
    what (the Python call), the C API's names by the package's."""
    m = _C_PREFIX.match(msg)
    if m and what:
        msg = what + ": " + msg[m.end():]
    # the adstack option: "kern_context_options.ad_stack_size = 40" or by its name alone
    msg = re.sub(r"kern_context_options\.ad_stack_size = (\d+)", r"kern.Context(ad_stack_size=\1)",
                 msg)
    msg = msg.replace("kern_context_options.ad_stack_size", "kern.Context(ad_stack_size=N)")
    return _C_NAME.sub(lambda m: _C_WORDS.get(m.group(0), m.group(0)), msg)


def _check(status, ctx_ptr, what=None):
    """Raises the exception of a failed status with the context's message in the package's
    words; what names the Python call ("Tape.backward") for messages and for a failure
    without one."""
    if status == 0:
        return
    msg = _c["last_error"](ctx_ptr).decode(errors="replace") if ctx_ptr else ""
    if not msg:
        msg = "%s failed (%s)" % (what or "the call", _STATUS_NAMES.get(status, status))
    raise _ERRORS.get(status, Error)(_python_words(msg, what))
