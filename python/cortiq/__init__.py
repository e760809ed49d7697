"""Cortiq from Python: load a GGUF model, generate, stream, chat, score.

    import cortiq
    model = cortiq.Model("model.gguf", threads=4)
    print(model.generate("Once upon a time", max_tokens=32, temperature=0).text)
    for piece in model.stream("Once upon a time", max_tokens=32):
        print(piece, end="", flush=True)

A thin layer over libcortiq.so's C API (ctypes); arrays come back as numpy
arrays. Errors are exceptions carrying the engine's message.
"""

import ctypes
import queue
import sys
import threading
from dataclasses import dataclass, field

import numpy as np

from . import _capi
from ._capi import Cancelled, CortiqError, InvalidArgument

__all__ = ["Model", "Session", "Result", "Stream", "CortiqError", "InvalidArgument", "Cancelled",
           "version"]


def version():
    """The library's version and commit: "0.1.0 (commit abc123)"."""
    return _capi.lib.cortiq_version().decode()


@dataclass
class Result:
    """What a generation gave."""

    text: str
    tokens: list
    finish_reason: str  # "stop", "max_tokens", "length", "cancelled", "loop"
    prompt_tokens: int
    cached_tokens: int  # prompt tokens reused from the session's cache
    generated_tokens: int
    prefill_tokens_per_second: float
    decode_tokens_per_second: float
    confidence: list = field(default_factory=list)  # with confidence=True


def _ids_array(ids):
    ids = list(ids)
    return (_capi.c_token * max(len(ids), 1))(*ids), len(ids)


def _result_from(handle):
    try:
        lib = _capi.lib
        n = ctypes.c_size_t(0)
        tokens = lib.cortiq_result_tokens(handle, ctypes.byref(n))
        ids = [tokens[i] for i in range(n.value)]
        confidence = lib.cortiq_result_confidence(handle, ctypes.byref(n))
        return Result(
            text=lib.cortiq_result_text(handle).decode("utf-8", "replace"),
            tokens=ids,
            finish_reason=_capi.FINISH_REASONS[lib.cortiq_result_finish_reason(handle)],
            prompt_tokens=lib.cortiq_result_prompt_tokens(handle),
            cached_tokens=lib.cortiq_result_cached_tokens(handle),
            generated_tokens=lib.cortiq_result_generated_tokens(handle),
            prefill_tokens_per_second=lib.cortiq_result_prefill_tokens_per_second(handle),
            decode_tokens_per_second=lib.cortiq_result_decode_tokens_per_second(handle),
            confidence=[confidence[i] for i in range(n.value)] if confidence else [],
        )
    finally:
        _capi.lib.cortiq_result_free(handle)


class _GenerateCall:
    """The C structs of one generate call, kept alive while it runs."""

    def __init__(self, max_tokens, temperature, top_k, top_p, min_p, typical_p, repeat_penalty,
                 repeat_last_n, presence_penalty, frequency_penalty, seed, logit_bias, suppress,
                 stop, ignore_eos, loop_stop, confidence, on_piece):
        s = _capi.SamplingOptions()
        _capi.lib.cortiq_sampling_options_init(ctypes.byref(s), ctypes.sizeof(s))
        for name, value in (("temperature", temperature), ("top_k", top_k), ("top_p", top_p),
                            ("min_p", min_p), ("typical_p", typical_p),
                            ("repeat_penalty", repeat_penalty), ("repeat_last_n", repeat_last_n),
                            ("presence_penalty", presence_penalty),
                            ("frequency_penalty", frequency_penalty), ("seed", seed)):
            if value is not None:
                setattr(s, name, value)
        biases = list((logit_bias or {}).items())
        self.biases = (_capi.LogitBias * max(len(biases), 1))(
            *[_capi.LogitBias(int(t), float(b)) for t, b in biases])
        s.logit_bias = self.biases
        s.n_logit_bias = len(biases)
        self.suppressed, s.n_suppressed = _ids_array(suppress or [])
        s.suppressed = self.suppressed
        self.sampling = s

        o = _capi.GenerateOptions()
        _capi.lib.cortiq_generate_options_init(ctypes.byref(o), ctypes.sizeof(o))
        o.sampling = ctypes.pointer(self.sampling)
        o.max_tokens = -1 if max_tokens is None else max_tokens
        o.ignore_eos = int(ignore_eos)
        o.loop_stop = int(loop_stop)
        o.confidence = int(confidence)
        stops = [x.encode() for x in ([stop] if isinstance(stop, str) else (stop or []))]
        self.stops = (ctypes.c_char_p * max(len(stops), 1))(*stops)
        o.stop = self.stops
        o.n_stop = len(stops)
        self.error = None
        if on_piece is not None:
            def on_token(piece, length, token, user_data):
                try:
                    return 1 if on_piece(ctypes.string_at(piece, length).decode("utf-8", "replace"),
                                         token) else 0
                except BaseException as e:  # never across the C frames; raised after the call
                    self.error = e
                    return 1
            self.callback = _capi.TOKEN_CALLBACK(on_token)
            o.on_token = self.callback
        self.options = o


class _Worker:
    """fn() on a thread of its own, with a stop() that cancels until fn has
    returned (a cancel that lands before the C call starts its steps is
    forgotten, so it repeats) or, when fn has not started yet, makes sure
    it never does and calls on_abandon() instead."""

    def __init__(self, fn, cancel, name, on_abandon=None):
        self._fn = fn
        self._cancel = cancel
        self._on_abandon = on_abandon
        self._gate = threading.Lock()
        self._abandoned = False
        self._running = False
        self._value = None
        self._error = None
        self.finished = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self):
        self._thread.start()

    def _run(self):
        with self._gate:
            if self._abandoned:
                return
            self._running = True
        try:
            self._value = self._fn()
        except BaseException as e:  # carried to the thread that asks for result()
            self._error = e
        finally:
            self.finished.set()

    def stop(self):
        while True:
            try:
                with self._gate:
                    first = not self._abandoned
                    self._abandoned = True
                    running = self._running
                if not running:
                    if first and self._on_abandon is not None:
                        self._on_abandon()
                    return
                while not self.finished.is_set():
                    self._cancel()
                    self.finished.wait(0.01)
                return
            except KeyboardInterrupt:
                continue  # a second Ctrl-C: it is stopping already

    def result(self):
        if self._error is not None:
            raise self._error
        return self._value


def _interruptible(fn, cancel, on_abandon=None):
    """fn() on a worker thread while this (the main) thread waits: Python
    runs its signal handlers here between waits, so Ctrl-C raises
    KeyboardInterrupt now, not when the C call returns; the call is
    cancelled and waited for before the exception goes on."""
    worker = _Worker(fn, cancel, "cortiq-call", on_abandon)
    try:
        worker.start()
        while not worker.finished.wait(0.05):
            pass
    except BaseException:
        worker.stop()
        raise
    return worker.result()


class _Closing:
    """close() when collected or at the end of a with block."""

    def __del__(self):
        self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Session(_Closing):
    """A conversation with a model: its KV cache. A prompt that extends the
    history reuses it; one that diverges cuts it back to the common prefix.
    It runs one call at a time: a call made while another runs (a stream
    not yet finished, another thread's call) raises RuntimeError; cancel()
    and close() may come from any thread. Ctrl-C during a call made on the
    main thread cancels it and raises KeyboardInterrupt once it stopped."""

    def __init__(self, model):
        self.model = model
        # Held from a call's start until its C call has returned (released
        # by the thread that ran it), and by close() while it frees.
        self._busy = threading.Lock()
        self._handle_lock = threading.RLock()  # cancel() against close()'s free
        self._caller = None  # the thread in the C call, while one runs
        handle = ctypes.c_void_p()
        _capi.check(_capi.lib.cortiq_session_create(model._handle, ctypes.byref(handle)))
        self._handle = handle

    def close(self):
        """Frees the session. A call still running (a stream's, another
        thread's) is cancelled and waited for first."""
        if not getattr(self, "_handle", None):
            return
        if self._caller == threading.get_ident():
            raise RuntimeError("a session cannot be closed from its own running call's callback")
        if sys.is_finalizing():
            # At exit a daemon thread in a call never runs again to end it:
            # the session is left to the process's end rather than waited for.
            if not self._busy.acquire(blocking=False):
                return
        else:
            while not self._busy.acquire(timeout=0.01):
                self.cancel()
        try:
            with self._handle_lock:
                handle, self._handle = self._handle, None
                if handle:
                    _capi.lib.cortiq_session_free(handle)
        finally:
            self._busy.release()

    def _call(self, fn):
        """Runs fn(handle), a C call on this session and the check of its
        status, as the session's one running call: a second call meanwhile
        (a stream not yet finished, another thread) raises RuntimeError
        instead of racing it. On the main thread the call runs on a worker,
        so that Ctrl-C cancels it at its next chunk or step and
        KeyboardInterrupt is raised once it has stopped."""
        if not self._busy.acquire(blocking=False):
            raise RuntimeError("the session is running another call (a stream not yet "
                               "finished?); wait for it, or use another Session")
        handle = self._handle
        if not handle:
            self._busy.release()
            raise InvalidArgument("the session is closed", _capi.INVALID_ARGUMENT)

        def run():
            # The lock goes when the C call has returned, whichever thread
            # waits for it (a KeyboardInterrupt may have left already).
            self._caller = threading.get_ident()
            try:
                return fn(handle)
            finally:
                self._caller = None
                self._busy.release()

        if threading.current_thread() is not threading.main_thread():
            return run()
        return _interruptible(run, self.cancel, on_abandon=self._busy.release)

    def reset(self):
        """Forgets the history."""
        self._call(lambda handle: _capi.check(_capi.lib.cortiq_session_reset(handle)))

    def cancel(self):
        """Stops the running call at its next prefill chunk or decode step:
        a generation ends with finish_reason "cancelled", a scoring call
        raises Cancelled. Safe from any thread; the session stays usable."""
        with self._handle_lock:
            if self._handle:
                _capi.lib.cortiq_cancel(self._handle)

    def generate(self, prompt, max_tokens=None, temperature=None, top_k=None, top_p=None,
                 min_p=None, typical_p=None, repeat_penalty=None, repeat_last_n=None,
                 presence_penalty=None, frequency_penalty=None, seed=None, logit_bias=None,
                 suppress=None, stop=None, ignore_eos=False, loop_stop=False, confidence=False,
                 on_piece=None, add_special=True, parse_special=True):
        """Generates from a text prompt or a list of ids. The sampling options
        are `cortiq run`'s (None: its default; temperature 0 is greedy).
        on_piece(text, token) sees each token's text as it comes (whole UTF-8
        characters); returning True stops the generation."""
        call = _GenerateCall(max_tokens, temperature, top_k, top_p, min_p, typical_p,
                             repeat_penalty, repeat_last_n, presence_penalty, frequency_penalty,
                             seed, logit_bias, suppress, stop, ignore_eos, loop_stop, confidence,
                             on_piece)
        call.options.add_special = int(add_special)
        call.options.parse_special = int(parse_special)
        if isinstance(prompt, str):
            text = prompt.encode()

            def start(session, result):
                return _capi.lib.cortiq_generate(session, text, ctypes.byref(call.options), result)
        else:
            ids, n = _ids_array(prompt)

            def start(session, result):
                return _capi.lib.cortiq_generate_ids(session, ids, n, ctypes.byref(call.options),
                                                     result)

        def run(session):
            handle = ctypes.c_void_p()
            status = start(session, ctypes.byref(handle))
            result = _result_from(handle) if status == _capi.OK else None
            if call.error is not None:
                raise call.error
            _capi.check(status)
            return result

        return self._call(run)

    def stream(self, prompt, **options):
        """Iterates over the generated text piece by piece (a Stream; its
        .result is set once it ends). Leaving the loop early, or a
        KeyboardInterrupt while it waits, cancels the generation."""
        return Stream(self, prompt, options)

    def chat(self, messages, **options):
        """Generates the assistant's reply to messages ([{"role", "content"}])
        through the model's chat template."""
        return self.generate(self.model.chat_prompt(messages), add_special=False,
                             parse_special=True, **options)

    def logits(self, prompt):
        """The logits of every position of the prompt (text, tokenized as
        generate() does, or ids) fed after the history: float32
        [n_tokens, n_vocab]. The prompt joins the history."""
        ids, n = _ids_array(self.model._ids(prompt))
        n_vocab = self.model.n_vocab
        out = np.empty((n, n_vocab), dtype=np.float32)
        got = ctypes.c_size_t(0)
        self._call(lambda handle: _capi.check(_capi.lib.cortiq_evaluate(
            handle, ids, n, out.ctypes.data_as(_capi.c_float_p), out.size, ctypes.byref(got))))
        return out

    def nll(self, prompt, start=0):
        """(sum of -log p(token | what precedes it), tokens scored) over the
        prompt's tokens from `start` (the first has no prediction on an empty
        history). The prompt joins the history."""
        ids, n = _ids_array(self.model._ids(prompt))
        total = ctypes.c_double(0)
        count = ctypes.c_int64(0)
        self._call(lambda handle: _capi.check(_capi.lib.cortiq_nll(
            handle, ids, n, start, ctypes.byref(total), ctypes.byref(count))))
        return total.value, count.value

    def perplexity(self, text, context=0, max_chunks=None):
        """(perplexity, its uncertainty) with llama-perplexity's method, as
        `cortiq perplexity -f FILE -c CONTEXT` computes them: text is
        tokenized once (with BOS), cut into chunks of `context` tokens (0:
        512, at most the session's), each scored on its second half from an
        empty cache. The history is forgotten."""
        ids, n = _ids_array(self.model._ids(text))
        ppl = ctypes.c_double(0)
        err = ctypes.c_double(0)
        chunks = -1 if max_chunks is None else max_chunks
        self._call(lambda handle: _capi.check(_capi.lib.cortiq_perplexity(
            handle, ids, n, context, chunks, ctypes.byref(ppl), ctypes.byref(err))))
        return ppl.value, err.value

    def embeddings(self, text, pooling="default", normalize=False):
        """One float32 vector [n_embd] for the text (or ids): the final hidden
        states pooled by "mean", "last", "cls" or "default" (what the file
        says, else mean), as `cortiq embed` gives. The history is forgotten."""
        if pooling not in _capi.POOLINGS:
            raise InvalidArgument("pooling must be one of " + ", ".join(_capi.POOLINGS),
                                  _capi.INVALID_ARGUMENT)
        ids, n = _ids_array(self.model._ids(text))
        out = np.empty(self.model.n_embd, dtype=np.float32)
        got = ctypes.c_size_t(0)
        how = _capi.POOLINGS[pooling]
        self._call(lambda handle: _capi.check(_capi.lib.cortiq_embed(
            handle, ids, n, how, int(normalize), out.ctypes.data_as(_capi.c_float_p), out.size,
            ctypes.byref(got))))
        return out


class Stream:
    """The pieces of a generation, as an iterator: the generation runs on a
    worker thread from the first next() on. `result` is the Result once
    the iteration has ended."""

    def __init__(self, session, prompt, options):
        self.session = session
        self.result = None
        self._prompt = prompt
        self._options = options
        self._pieces = queue.Queue()
        self._done = object()
        self._stopping = threading.Event()
        self._started = False

    def _generate(self):
        try:
            self.result = self.session.generate(self._prompt, on_piece=self._put, **self._options)
        finally:
            self._pieces.put(self._done)

    def _put(self, piece, token):
        self._pieces.put(piece)
        return self._stopping.is_set()  # True stops the generation

    def __iter__(self):
        if self._started:
            raise RuntimeError("a Stream is iterated once")
        self._started = True
        worker = _Worker(self._generate, self.session.cancel, "cortiq-stream")
        try:
            worker.start()
            while True:
                try:
                    # A timeout keeps the wait interruptible (Ctrl-C).
                    piece = self._pieces.get(timeout=0.05)
                except queue.Empty:
                    continue
                if piece is self._done:
                    break
                yield piece
        finally:
            # Left early (break, an exception, KeyboardInterrupt): stop the
            # generation and wait for it, so the session is free again.
            self._stopping.set()
            worker.stop()
        worker.result()  # raises the generation's error, if it failed


class Model(_Closing):
    """A loaded model file. Sessions share it (and its weights); the
    convenience methods below use one default session."""

    def __init__(self, path, threads=0, context=0, kv_type="f16", chunk_size=512,
                 progress=None, device="cpu", gpu_layers=-1):
        """threads 0: one per core; context 0: the model's, at most 4096;
        kv_type "f16" or "f32"; progress(fraction) while the weights load;
        device "cpu", "vulkan" or "auto" (a family the device cannot run
        stays on the CPU: Model.device says where it runs), with the last
        gpu_layers layers and the output head on it (-1: all)."""
        self._handle = None
        self._session = None
        if kv_type not in ("f16", "f32"):
            raise InvalidArgument('kv_type must be "f16" or "f32"', _capi.INVALID_ARGUMENT)
        o = _capi.LoadOptions()
        _capi.lib.cortiq_load_options_init(ctypes.byref(o), ctypes.sizeof(o))
        o.threads = threads
        o.context = context
        o.kv_type = 1 if kv_type == "f32" else 0
        o.chunk_size = chunk_size
        device_name = str(device).encode()  # kept alive until the load returns
        o.device = device_name
        o.gpu_layers = gpu_layers
        errors = []
        if progress is not None:
            def on_progress(fraction, user_data):
                try:
                    progress(fraction)
                except BaseException as e:
                    errors.append(e)
            callback = _capi.PROGRESS(on_progress)
            o.progress = callback
        handle = ctypes.c_void_p()
        status = _capi.lib.cortiq_model_load(str(path).encode(), ctypes.byref(o),
                                             ctypes.byref(handle))
        if status == _capi.OK and errors:
            _capi.lib.cortiq_model_free(handle)
            raise errors[0]
        _capi.check(status)
        self._handle = handle

    def close(self):
        """Frees the model (its sessions keep the weights until they go)."""
        if self._session is not None:
            self._session.close()
            self._session = None
        if self._handle:
            _capi.lib.cortiq_model_free(self._handle)
            self._handle = None

    @property
    def n_vocab(self):
        return _capi.lib.cortiq_model_n_vocab(self._handle)

    @property
    def context(self):
        """KV positions per session."""
        return _capi.lib.cortiq_model_context(self._handle)

    @property
    def n_embd(self):
        return _capi.lib.cortiq_model_n_embd(self._handle)

    @property
    def architecture(self):
        return _capi.lib.cortiq_model_architecture(self._handle).decode()

    @property
    def device(self):
        """Where the sessions run: "cpu", or the device ("vulkan 0: ...")."""
        return _capi.lib.cortiq_model_device(self._handle).decode()

    @property
    def bos(self):
        """The beginning-of-sequence id, or None."""
        bos = _capi.lib.cortiq_model_bos(self._handle)
        return None if bos < 0 else bos

    @property
    def eos(self):
        eos = _capi.lib.cortiq_model_eos(self._handle)
        return None if eos < 0 else eos

    def tokenize(self, text, add_special=True, parse_special=True):
        """Text to ids: BOS/EOS as the model adds them (add_special), control
        tokens written in the text as their ids (parse_special)."""
        data = text.encode()
        ids, n = _capi.call_with_buffer(_capi.lib.cortiq_tokenize, _capi.c_token, self._handle,
                                        data, len(data), int(add_special), int(parse_special))
        return list(ids[:n])

    def detokenize(self, ids):
        ids, n = _ids_array(ids)
        text, length = _capi.call_with_buffer(_capi.lib.cortiq_detokenize, ctypes.c_char,
                                              self._handle, ids, n)
        return text.raw[:length].decode("utf-8", "replace")

    def apply_chat_template(self, messages, add_generation_prompt=True):
        """The prompt the model's chat template (ChatML when the file has
        none) makes of messages ([{"role": ..., "content": ...}])."""
        array = (_capi.ChatMessage * max(len(messages), 1))(
            *[_capi.ChatMessage(m["role"].encode(), m["content"].encode()) for m in messages])
        text, length = _capi.call_with_buffer(_capi.lib.cortiq_apply_chat_template, ctypes.c_char,
                                              self._handle, array, len(messages),
                                              int(add_generation_prompt))
        return text.raw[:length].decode("utf-8", "replace")

    def chat_prompt(self, messages):
        """The ids a chat turn generates from, as `cortiq chat` makes them:
        the template's text, its control tokens parsed, BOS added unless
        the template wrote it."""
        text = self.apply_chat_template(messages)
        ids = self.tokenize(text, add_special=False)
        if self.bos is not None and ids[:1] == [self.bos]:
            return ids
        return self.tokenize(text, add_special=True)

    def _ids(self, prompt):
        return self.tokenize(prompt) if isinstance(prompt, str) else list(prompt)

    def session(self):
        """A new conversation of its own (its own KV cache)."""
        return Session(self)

    @property
    def default_session(self):
        if self._session is None:
            self._session = Session(self)
        return self._session

    # The default session's calls: see Session.
    def generate(self, prompt, **options):
        return self.default_session.generate(prompt, **options)

    def stream(self, prompt, **options):
        return self.default_session.stream(prompt, **options)

    def chat(self, messages, **options):
        return self.default_session.chat(messages, **options)

    def cancel(self):
        if self._session is not None:
            self._session.cancel()

    def logits(self, prompt):
        """Logits of every position of prompt on a fresh history."""
        self.default_session.reset()
        return self.default_session.logits(prompt)

    def nll(self, prompt):
        self.default_session.reset()
        return self.default_session.nll(prompt)

    def perplexity(self, text, context=0, max_chunks=None):
        return self.default_session.perplexity(text, context, max_chunks)

    def embeddings(self, text, pooling="default", normalize=False):
        return self.default_session.embeddings(text, pooling, normalize)

    def __repr__(self):
        return "<cortiq.Model %s, %d tokens, context %d>" % (self.architecture, self.n_vocab,
                                                              self.context)

