"""The Python package against the engine's own command line: generation,
streaming, chat, logits (bit for bit), embeddings, perplexity, cancellation
and errors.

Needs CORTIQ_CLI (the cortiq binary: it writes the test model and gives the
command line's answers) and libcortiq.so (found as cortiq/_capi.py says).
Run: CORTIQ_CLI=build/src/cli/cortiq PYTHONPATH=python python3 -m unittest discover python/tests
"""

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import numpy as np

import cortiq

CLI = os.environ.get("CORTIQ_CLI", "")
PROMPT = "Once upon a time"
TEXT = ("The quick brown fox jumps over the lazy dog. " * 4 +
        "A journey of a thousand miles begins with a single step. " * 4 +
        "All that glitters is not gold; all who wander are not lost. " * 4)


def setUpModule():
    global WORK, MODEL_PATH, MODEL, SLOW_MODEL
    if not CLI:
        raise unittest.SkipTest("CORTIQ_CLI must name the cortiq binary")
    WORK = tempfile.TemporaryDirectory(prefix="cortiq-python-")
    MODEL_PATH = os.path.join(WORK.name, "model.gguf")
    cli("gen-model", "--arch", "llama", "--embd", "64", "--layers", "2", "--heads", "4",
        "--kv-heads", "2", "--ff", "128", "--ctx", "2048", "--seed", "7", "-o", MODEL_PATH)
    MODEL = cortiq.Model(MODEL_PATH, threads=2)
    # A slower one, for what needs a call still running a moment later.
    slow_path = os.path.join(WORK.name, "slow.gguf")
    cli("gen-model", "--arch", "llama", "--embd", "256", "--layers", "4", "--heads", "4",
        "--kv-heads", "2", "--ff", "512", "--ctx", "4096", "--seed", "7", "-o", slow_path)
    SLOW_MODEL = cortiq.Model(slow_path, threads=2)


def tearDownModule():
    MODEL.close()
    SLOW_MODEL.close()
    WORK.cleanup()


def cli(*args):
    done = subprocess.run([CLI, *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise AssertionError("cortiq %s failed: %s" % (" ".join(args), done.stderr))
    return done.stdout


class TestModel(unittest.TestCase):
    def test_describes_the_file(self):
        self.assertEqual(MODEL.architecture, "llama")
        self.assertEqual(MODEL.context, 2048)
        self.assertEqual(MODEL.n_embd, 64)
        self.assertGreater(MODEL.n_vocab, 100)
        self.assertIn("commit", cortiq.version())

    def test_tokenize_round_trips_and_matches_the_command_line(self):
        ids = MODEL.tokenize(TEXT)
        self.assertEqual(ids[0], MODEL.bos)
        self.assertEqual(MODEL.detokenize(ids[1:]), TEXT)
        expected = [int(x) for x in cli("tokenize", "-m", MODEL_PATH, "--ids", TEXT).split()]
        self.assertEqual(ids, expected)
        self.assertEqual(MODEL.tokenize(TEXT, add_special=False), ids[1:])

    def test_load_reports_progress_and_refuses_missing_files(self):
        seen = []
        with cortiq.Model(MODEL_PATH, threads=1, context=128, progress=seen.append) as small:
            self.assertEqual(small.context, 128)
        self.assertEqual(seen[-1], 1.0)
        self.assertEqual(seen, sorted(seen))
        with self.assertRaises(cortiq.CortiqError) as caught:
            cortiq.Model("/nonexistent/model.gguf")
        self.assertIn("/nonexistent/model.gguf", str(caught.exception))
        with self.assertRaises(cortiq.InvalidArgument):
            cortiq.Model(MODEL_PATH, kv_type="q8")
        with self.assertRaises(cortiq.InvalidArgument):
            cortiq.Model(MODEL_PATH, threads=-1)


class TestGenerate(unittest.TestCase):
    def test_greedy_gives_the_command_lines_tokens(self):
        result = MODEL.generate(PROMPT, max_tokens=16, temperature=0, ignore_eos=True)
        run = json.loads(cli("run", "-m", MODEL_PATH, "-p", PROMPT, "-n", "16", "--temp", "0",
                             "--ignore-eos", "--json", "-t", "2"))
        self.assertEqual(result.tokens, run["ids"])
        self.assertEqual(result.text, run["text"])
        self.assertEqual(result.finish_reason, "max_tokens")
        self.assertEqual(result.generated_tokens, 16)
        self.assertGreater(result.decode_tokens_per_second, 0)

    def test_sampling_options_reach_the_sampler(self):
        a = MODEL.generate(PROMPT, max_tokens=12, seed=5, ignore_eos=True)
        b = MODEL.generate(PROMPT, max_tokens=12, seed=5, ignore_eos=True)
        self.assertEqual(a.tokens, b.tokens)
        self.assertGreater(b.cached_tokens, 0)
        banned = MODEL.generate(PROMPT, max_tokens=12, seed=5, ignore_eos=True,
                                logit_bias={a.tokens[0]: float("-inf")})
        self.assertNotIn(a.tokens[0], banned.tokens)
        suppressed = MODEL.generate(PROMPT, max_tokens=12, temperature=0, ignore_eos=True,
                                    suppress=[a.tokens[0]])
        self.assertNotIn(a.tokens[0], suppressed.tokens)
        with_confidence = MODEL.generate(PROMPT, max_tokens=4, temperature=0, confidence=True)
        self.assertEqual(len(with_confidence.confidence), with_confidence.generated_tokens)
        self.assertTrue(all(0 < p <= 1 for p in with_confidence.confidence))

    def test_stop_strings_end_the_text_before_them(self):
        full = MODEL.generate(PROMPT, max_tokens=24, temperature=0, ignore_eos=True).text
        stop = full[8:12]
        cut = MODEL.generate(PROMPT, max_tokens=24, temperature=0, ignore_eos=True, stop=[stop])
        self.assertEqual(cut.finish_reason, "stop")
        self.assertEqual(cut.text, full[:full.index(stop)])

    def test_stream_gives_the_generated_text(self):
        whole = MODEL.generate(PROMPT, max_tokens=20, temperature=0, ignore_eos=True)
        stream = MODEL.stream(PROMPT, max_tokens=20, temperature=0, ignore_eos=True)
        pieces = list(stream)
        self.assertEqual(len(pieces), 20)
        self.assertEqual("".join(pieces), whole.text)
        self.assertEqual(stream.result.tokens, whole.tokens)

    def test_leaving_a_stream_early_cancels_it(self):
        session = MODEL.session()
        stream = session.stream(PROMPT, temperature=0, ignore_eos=True)  # to the context's end
        for i, _ in enumerate(stream):
            if i == 2:
                break
        # The loop's exit closed the iterator: the generation stopped.
        self.assertEqual(stream.result.finish_reason, "cancelled")
        self.assertLess(stream.result.generated_tokens, 2000)
        closed = session.stream(PROMPT, temperature=0, ignore_eos=True)
        iterator = iter(closed)
        next(iterator)
        iterator.close()
        self.assertEqual(closed.result.finish_reason, "cancelled")
        self.assertFalse(any(t.name == "cortiq-stream" for t in threading.enumerate()))
        self.assertEqual(session.generate(PROMPT, max_tokens=3, temperature=0).generated_tokens, 3)

    def test_keyboard_interrupt_during_a_stream_cancels_it(self):
        session = MODEL.session()
        stream = session.stream(PROMPT, temperature=0, ignore_eos=True)  # until the context is full
        pieces = 0
        with self.assertRaises(KeyboardInterrupt):
            for _ in stream:
                pieces += 1
                if pieces == 1:
                    # What Ctrl-C does: SIGINT, KeyboardInterrupt in the main thread.
                    signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
        self.assertGreater(pieces, 0)
        self.assertEqual(stream.result.finish_reason, "cancelled")
        self.assertLess(stream.result.generated_tokens, 2000)
        # The session is usable and gives a fresh session's tokens.
        again = session.generate(PROMPT, max_tokens=8, temperature=0, ignore_eos=True)
        fresh = MODEL.session().generate(PROMPT, max_tokens=8, temperature=0, ignore_eos=True)
        self.assertEqual(again.tokens, fresh.tokens)

    def test_cancel_from_another_thread(self):
        session = MODEL.session()
        started = threading.Event()

        def cancel_soon():
            started.wait(10)
            session.cancel()

        thread = threading.Thread(target=cancel_soon)
        thread.start()
        result = session.generate(PROMPT, max_tokens=100000, temperature=0, ignore_eos=True,
                                  on_piece=lambda piece, token: started.set())
        thread.join()
        self.assertEqual(result.finish_reason, "cancelled")
        self.assertGreaterEqual(result.generated_tokens, 1)
        self.assertLess(result.generated_tokens, 2000)
        # A long prefill (125 chunks of 16), cancelled before it is done: a
        # scoring call raises.
        ids = [3 + (i * 7919) % 500 for i in range(2000)]
        small_chunks = cortiq.Model(MODEL_PATH, threads=2, chunk_size=16)
        session = small_chunks.session()
        stop = threading.Event()

        def keep_cancelling():
            while not stop.is_set():
                session.cancel()
                time.sleep(0.001)

        thread = threading.Thread(target=keep_cancelling)
        thread.start()
        try:
            with self.assertRaises(cortiq.Cancelled):
                session.logits(ids)
        finally:
            stop.set()
            thread.join()

    def test_keyboard_interrupt_during_generate_cancels_it(self):
        # No on_piece: no Python code runs during the C call, so Ctrl-C is
        # seen only because the main thread waits for a worker. Run to the
        # context's end, this generation takes 1.5 s on a 2-core machine.
        session = SLOW_MODEL.session()

        def interrupt_once_running():
            deadline = time.monotonic() + 30
            while session._caller is None:
                if time.monotonic() > deadline:
                    return  # never started: assertRaises fails below
                time.sleep(0.0005)
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

        thread = threading.Thread(target=interrupt_once_running)
        thread.start()
        started = time.monotonic()
        try:
            with self.assertRaises(KeyboardInterrupt):
                session.generate(PROMPT, temperature=0, ignore_eos=True)
        finally:
            thread.join()
        # Raised when the signal came (a few milliseconds), not when the
        # generation would have ended.
        self.assertLess(time.monotonic() - started, 0.5)
        self.assertIsNone(session._caller)  # the C call has returned
        again = session.generate(PROMPT, max_tokens=8, temperature=0, ignore_eos=True)
        fresh = SLOW_MODEL.session().generate(PROMPT, max_tokens=8, temperature=0,
                                              ignore_eos=True)
        self.assertEqual(again.tokens, fresh.tokens)

    def test_a_session_runs_one_call_at_a_time(self):
        session = SLOW_MODEL.session()
        stream = session.stream(PROMPT, temperature=0, ignore_eos=True)  # 1.5 s to the end
        pieces = iter(stream)
        next(pieces)
        # The stream's generation is running: a second call is refused, not raced.
        with self.assertRaisesRegex(RuntimeError, "running another call"):
            session.generate(PROMPT, max_tokens=2)
        with self.assertRaisesRegex(RuntimeError, "running another call"):
            session.logits(PROMPT)
        # close() cancels the running generation and waits for it.
        session.close()
        rest = list(pieces)
        self.assertEqual(stream.result.finish_reason, "cancelled")  # not "length"
        self.assertLess(len(rest), 4000)
        with self.assertRaisesRegex(cortiq.InvalidArgument, "closed"):
            session.generate(PROMPT, max_tokens=2)
        session.close()  # again: nothing to do
        # A session cannot close itself from its own callback (it would wait
        # for itself).
        other = MODEL.session()
        errors = []

        def close_inside(piece, token):
            try:
                other.close()
            except RuntimeError as e:
                errors.append(e)
            return True

        other.generate(PROMPT, max_tokens=4, on_piece=close_inside)
        self.assertEqual(len(errors), 1)
        other.close()

    def test_the_callback_can_stop_and_its_exceptions_come_back(self):
        seen = []
        result = MODEL.generate(PROMPT, max_tokens=50, temperature=0, ignore_eos=True,
                                on_piece=lambda piece, token: seen.append(token) or len(seen) == 4)
        self.assertEqual(result.finish_reason, "cancelled")
        self.assertEqual(result.tokens, seen)

        def fails(piece, token):
            raise RuntimeError("from the callback")

        with self.assertRaisesRegex(RuntimeError, "from the callback"):
            MODEL.generate(PROMPT, max_tokens=5, on_piece=fails)

    def test_chat_uses_the_template_as_the_command_line_does(self):
        messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
        prompt = MODEL.apply_chat_template(messages)
        self.assertIn("<|im_start|>user\nHi<|im_end|>", prompt)
        self.assertTrue(prompt.endswith("<|im_start|>assistant\n"))
        session = MODEL.session()
        reply = session.chat(messages, max_tokens=6, temperature=0, ignore_eos=True)
        self.assertEqual(reply.generated_tokens, 6)
        ids = MODEL.tokenize(prompt)  # ChatML writes no BOS: the model's is added
        self.assertEqual(MODEL.chat_prompt(messages), ids)
        direct = MODEL.session().generate(ids, max_tokens=6, temperature=0, ignore_eos=True)
        self.assertEqual(reply.tokens, direct.tokens)


class TestScoring(unittest.TestCase):
    def test_logits_are_the_command_lines_bit_for_bit(self):
        out = os.path.join(WORK.name, "logits.f32")
        cli("logits", "-m", MODEL_PATH, "-p", TEXT, "-o", out, "-t", "2")
        expected = np.fromfile(out, dtype=np.float32).reshape(-1, MODEL.n_vocab)
        logits = MODEL.logits(TEXT)
        self.assertEqual(logits.dtype, np.float32)
        self.assertEqual(logits.shape, expected.shape)
        self.assertTrue(np.array_equal(logits, expected))

    def test_nll_is_the_log_softmax_of_the_logits(self):
        ids = MODEL.tokenize(TEXT)
        logits = MODEL.logits(ids).astype(np.float64)
        top = logits.max(axis=1, keepdims=True)
        log_probs = logits - top - np.log(np.exp(logits - top).sum(axis=1, keepdims=True))
        expected = -sum(log_probs[i - 1, ids[i]] for i in range(1, len(ids)))
        total, count = MODEL.nll(ids)
        self.assertEqual(count, len(ids) - 1)
        self.assertAlmostEqual(total, expected, delta=1e-6 * abs(expected))

    def test_perplexity_is_the_command_lines(self):
        path = os.path.join(WORK.name, "text.txt")
        with open(path, "w") as f:
            f.write(TEXT * 2)
        printed = cli("perplexity", "-m", MODEL_PATH, "-f", path, "-c", "64", "-t", "2")
        line = next(x for x in printed.splitlines() if x.startswith("Final estimate"))
        ppl, err = MODEL.perplexity(TEXT * 2, context=64)
        self.assertEqual(line, "Final estimate: PPL = %.4f +/- %.5f" % (ppl, err))
        first, _ = MODEL.perplexity(TEXT * 2, context=64, max_chunks=2)
        self.assertNotEqual(first, ppl)

    def test_embeddings_are_the_command_lines(self):
        vector = MODEL.embeddings(TEXT, pooling="mean", normalize=True)
        self.assertEqual(vector.shape, (64,))
        self.assertAlmostEqual(float(np.linalg.norm(vector.astype(np.float64))), 1.0, places=5)
        embed = json.loads(cli("embed", "-m", MODEL_PATH, "-p", TEXT, "--pooling", "mean",
                               "--normalize", "--json", "-t", "2"))
        np.testing.assert_array_equal(vector, np.array(embed["embedding"], dtype=np.float32))
        self.assertFalse(np.array_equal(MODEL.embeddings(TEXT, pooling="last"),
                                        MODEL.embeddings(TEXT, pooling="mean")))


class TestDevice(unittest.TestCase):
    def test_the_device_options_reach_the_engine(self):
        self.assertEqual(MODEL.device, "cpu")
        with self.assertRaisesRegex(cortiq.InvalidArgument, '"cpu", "vulkan" or "auto"'):
            cortiq.Model(MODEL_PATH, device="tpu")
        with self.assertRaisesRegex(cortiq.InvalidArgument, "gpu_layers"):
            cortiq.Model(MODEL_PATH, gpu_layers=-2)
        try:
            on_device = cortiq.Model(MODEL_PATH, threads=2, kv_type="f32", device="vulkan",
                                     gpu_layers=1)
        except cortiq.CortiqError as e:
            if "no Vulkan" in str(e):
                self.skipTest(str(e))
            raise
        # The last of the two layers and the head on the device: the CPU's
        # greedy tokens (F32 weights and cache rows on both).
        with on_device, cortiq.Model(MODEL_PATH, threads=2, kv_type="f32") as on_cpu:
            self.assertIn("vulkan 0", on_device.device)
            self.assertIn("with layer 1 and the output head (layer 0 on the CPU)",
                          on_device.device)
            want = on_cpu.generate(PROMPT, max_tokens=8, temperature=0, ignore_eos=True)
            got = on_device.generate(PROMPT, max_tokens=8, temperature=0, ignore_eos=True)
            self.assertEqual(got.tokens, want.tokens)


class TestErrors(unittest.TestCase):
    def test_bad_arguments_raise_with_the_engines_message(self):
        with self.assertRaisesRegex(cortiq.InvalidArgument, "outside the vocabulary"):
            MODEL.detokenize([MODEL.n_vocab])
        with self.assertRaisesRegex(cortiq.InvalidArgument, "top_p"):
            MODEL.generate(PROMPT, top_p=0.0)
        with self.assertRaises(cortiq.InvalidArgument):
            MODEL.generate([])
        with self.assertRaises(cortiq.InvalidArgument):
            MODEL.embeddings(TEXT, pooling="median")
        with self.assertRaisesRegex(cortiq.CortiqError, "context"):
            MODEL.generate([3 + i % 500 for i in range(2500)])
        with self.assertRaisesRegex(cortiq.CortiqError, "chunk"):
            MODEL.perplexity("short", context=64)
        # After the refusals the model still answers.
        self.assertEqual(MODEL.generate(PROMPT, max_tokens=2, temperature=0).generated_tokens, 2)

    def test_errors_carry_the_status(self):
        with self.assertRaises(cortiq.CortiqError) as caught:
            MODEL.detokenize([-1])
        self.assertEqual(caught.exception.status, 1)
        self.assertIsInstance(caught.exception, ValueError)


class TestDocs(unittest.TestCase):
    """Every ```python block of docs/python.md runs, in a folder holding the
    test model as model.gguf."""

    def test_every_example_runs(self):
        docs = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "python.md")
        with open(docs) as f:
            blocks = re.findall(r"^```python\n(.*?)^```$", f.read(), re.S | re.M)
        self.assertGreaterEqual(len(blocks), 5)
        folder = os.path.join(WORK.name, "docs")
        os.makedirs(folder, exist_ok=True)
        link = os.path.join(folder, "model.gguf")
        if not os.path.exists(link):
            os.symlink(MODEL_PATH, link)
        package = os.path.dirname(os.path.dirname(os.path.abspath(cortiq.__file__)))
        env = dict(os.environ, PYTHONPATH=package)
        printed = []
        for block in blocks:
            done = subprocess.run([sys.executable, "-c", block], cwd=folder, env=env,
                                  capture_output=True, text=True, timeout=120)
            self.assertEqual(done.returncode, 0, "this example failed:\n%s\n%s" %
                             (block, done.stderr))
            printed.append(done.stdout)
        self.assertIn("max_tokens 16 tokens", printed[0])
        self.assertIn("prompt tokens came from the cache", printed[1])
        self.assertIn("PPL = ", printed[2])
        self.assertEqual(printed[3].strip(), "cancelled")
        self.assertEqual(printed[4].count("refused:"), 2)


if __name__ == "__main__":
    unittest.main()
