"""The C API of libcortiq.so (include/cortiq/cortiq.h) through ctypes.

Finds the library, declares every function's argument and result types, and
turns a failed status into an exception carrying the engine's message.
"""

import ctypes
import ctypes.util
import os
from pathlib import Path

# cortiq_status
OK = 0
INVALID_ARGUMENT = 1
BUFFER_TOO_SMALL = 2
ENGINE = 3
CANCELLED = 4
OUT_OF_MEMORY = 5
INTERNAL = 6

FINISH_REASONS = ("stop", "max_tokens", "length", "cancelled", "loop")
POOLINGS = {"default": -1, "mean": 0, "last": 1, "cls": 2}


class CortiqError(Exception):
    """A call the engine refused; `status` is the C API's cortiq_status."""

    def __init__(self, message, status=ENGINE):
        super().__init__(message)
        self.status = status


class InvalidArgument(CortiqError, ValueError):
    """A bad argument: an id outside the vocabulary, an invalid option."""


class Cancelled(CortiqError):
    """A scoring call stopped by cancel()."""


class BufferTooSmall(CortiqError):
    pass


_ERRORS = {INVALID_ARGUMENT: InvalidArgument, BUFFER_TOO_SMALL: BufferTooSmall, CANCELLED: Cancelled}


def _candidates():
    """Where libcortiq.so may be: $CORTIQ_LIBRARY, the build tree beside
    this source tree, then the system's library path (cmake --install)."""
    given = os.environ.get("CORTIQ_LIBRARY")
    if given:
        yield given
        return
    build = Path(__file__).resolve().parents[2] / "build" / "src" / "capi" / "libcortiq.so"
    if build.exists():
        yield str(build)
    found = ctypes.util.find_library("cortiq")
    yield found if found else "libcortiq.so.0"


def _load():
    errors = []
    for candidate in _candidates():
        try:
            return ctypes.CDLL(candidate)
        except OSError as e:
            errors.append(str(e))
    raise ImportError(
        "cannot load libcortiq.so (build it with scripts/setup.sh, install it with "
        "cmake --install, or name it in CORTIQ_LIBRARY): " + "; ".join(errors)
    )


lib = _load()

c_token = ctypes.c_int32
c_token_p = ctypes.POINTER(c_token)
c_size_p = ctypes.POINTER(ctypes.c_size_t)
c_float_p = ctypes.POINTER(ctypes.c_float)

PROGRESS = ctypes.CFUNCTYPE(None, ctypes.c_double, ctypes.c_void_p)
TOKEN_CALLBACK = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.POINTER(ctypes.c_char), ctypes.c_size_t, c_token, ctypes.c_void_p
)


class LoadOptions(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("threads", ctypes.c_int32),
        ("context", ctypes.c_int64),
        ("kv_type", ctypes.c_int32),
        ("chunk_size", ctypes.c_int64),
        ("progress", PROGRESS),
        ("user_data", ctypes.c_void_p),
        ("device", ctypes.c_char_p),
        ("gpu_layers", ctypes.c_int64),
    ]


class LogitBias(ctypes.Structure):
    _fields_ = [("token", c_token), ("bias", ctypes.c_float)]


class SamplingOptions(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("temperature", ctypes.c_float),
        ("top_k", ctypes.c_int32),
        ("top_p", ctypes.c_float),
        ("min_p", ctypes.c_float),
        ("typical_p", ctypes.c_float),
        ("repeat_penalty", ctypes.c_float),
        ("repeat_last_n", ctypes.c_int32),
        ("presence_penalty", ctypes.c_float),
        ("frequency_penalty", ctypes.c_float),
        ("seed", ctypes.c_uint64),
        ("logit_bias", ctypes.POINTER(LogitBias)),
        ("n_logit_bias", ctypes.c_size_t),
        ("suppressed", c_token_p),
        ("n_suppressed", ctypes.c_size_t),
    ]


class GenerateOptions(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("sampling", ctypes.POINTER(SamplingOptions)),
        ("max_tokens", ctypes.c_int64),
        ("ignore_eos", ctypes.c_int),
        ("stop", ctypes.POINTER(ctypes.c_char_p)),
        ("n_stop", ctypes.c_size_t),
        ("loop_stop", ctypes.c_int),
        ("confidence", ctypes.c_int),
        ("add_special", ctypes.c_int),
        ("parse_special", ctypes.c_int),
        ("on_token", TOKEN_CALLBACK),
        ("user_data", ctypes.c_void_p),
    ]


class ChatMessage(ctypes.Structure):
    _fields_ = [("role", ctypes.c_char_p), ("content", ctypes.c_char_p)]


def _declare(name, result, *args):
    fn = getattr(lib, name)
    fn.restype = result
    fn.argtypes = list(args)


_status = ctypes.c_int
_p = ctypes.c_void_p
_declare("cortiq_version", ctypes.c_char_p)
_declare("cortiq_api_version", ctypes.c_int)
_declare("cortiq_last_error", ctypes.c_char_p)
_declare("cortiq_load_options_init", None, ctypes.POINTER(LoadOptions), ctypes.c_size_t)
_declare("cortiq_model_load", _status, ctypes.c_char_p, ctypes.POINTER(LoadOptions), ctypes.POINTER(_p))
_declare("cortiq_model_free", None, _p)
for _name in ("n_vocab", "context", "n_embd"):
    _declare("cortiq_model_" + _name, ctypes.c_int64, _p)
_declare("cortiq_model_architecture", ctypes.c_char_p, _p)
_declare("cortiq_model_device", ctypes.c_char_p, _p)
_declare("cortiq_model_bos", c_token, _p)
_declare("cortiq_model_eos", c_token, _p)
_declare("cortiq_tokenize", _status, _p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
         c_token_p, ctypes.c_size_t, c_size_p)
_declare("cortiq_detokenize", _status, _p, c_token_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t,
         c_size_p)
_declare("cortiq_apply_chat_template", _status, _p, ctypes.POINTER(ChatMessage), ctypes.c_size_t,
         ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t, c_size_p)
_declare("cortiq_session_create", _status, _p, ctypes.POINTER(_p))
_declare("cortiq_session_free", None, _p)
_declare("cortiq_session_reset", _status, _p)
_declare("cortiq_cancel", None, _p)
_declare("cortiq_sampling_options_init", None, ctypes.POINTER(SamplingOptions), ctypes.c_size_t)
_declare("cortiq_generate_options_init", None, ctypes.POINTER(GenerateOptions), ctypes.c_size_t)
_declare("cortiq_generate", _status, _p, ctypes.c_char_p, ctypes.POINTER(GenerateOptions), ctypes.POINTER(_p))
_declare("cortiq_generate_ids", _status, _p, c_token_p, ctypes.c_size_t, ctypes.POINTER(GenerateOptions),
         ctypes.POINTER(_p))
_declare("cortiq_result_free", None, _p)
_declare("cortiq_result_text", ctypes.c_char_p, _p)
_declare("cortiq_result_tokens", c_token_p, _p, c_size_p)
_declare("cortiq_result_finish_reason", ctypes.c_int, _p)
for _name in ("prompt_tokens", "cached_tokens", "generated_tokens"):
    _declare("cortiq_result_" + _name, ctypes.c_int64, _p)
_declare("cortiq_result_prefill_tokens_per_second", ctypes.c_double, _p)
_declare("cortiq_result_decode_tokens_per_second", ctypes.c_double, _p)
_declare("cortiq_result_confidence", c_float_p, _p, c_size_p)
_declare("cortiq_evaluate", _status, _p, c_token_p, ctypes.c_size_t, c_float_p, ctypes.c_size_t, c_size_p)
_declare("cortiq_nll", _status, _p, c_token_p, ctypes.c_size_t, ctypes.c_size_t,
         ctypes.POINTER(ctypes.c_double), ctypes.POINTER(ctypes.c_int64))
_declare("cortiq_perplexity", _status, _p, c_token_p, ctypes.c_size_t, ctypes.c_int64, ctypes.c_int64,
         ctypes.POINTER(ctypes.c_double), ctypes.POINTER(ctypes.c_double))
_declare("cortiq_embed", _status, _p, c_token_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, c_float_p,
         ctypes.c_size_t, c_size_p)


def check(status):
    """Raises the exception for a failed status, with the engine's message."""
    if status != OK:
        message = lib.cortiq_last_error().decode("utf-8", "replace")
        raise _ERRORS.get(status, CortiqError)(message, status)


def call_with_buffer(fn, element, *args):
    """Calls a function that fills a caller's buffer (…, buffer, capacity,
    &needed): first with the length a guess allows, again when too small."""
    needed = ctypes.c_size_t(0)
    capacity = 256
    while True:
        buffer = (element * (capacity + 1))()
        status = fn(*args, buffer, capacity + 1, ctypes.byref(needed))
        if status != BUFFER_TOO_SMALL:
            check(status)
            return buffer, needed.value
        capacity = needed.value
