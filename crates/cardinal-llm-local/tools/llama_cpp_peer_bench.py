#!/usr/bin/env python3
"""llama.cpp itself (through llama-cpp-python) on the same GGUF, prompt and thread count as
`cargo run --release -p cardinal-llm-local --example llm_bench -- --write-prompt /tmp/prompt.txt`.

Not part of the build. How it was measured (throwaway venv, llama.cpp built from the sdist with
the same CPU baseline as llama-cpp-sys-2's default build: GGML_NATIVE=OFF, i.e. AVX2/FMA/F16C):

    python3 -m venv /tmp/peer/venv
    CMAKE_ARGS="-DGGML_NATIVE=OFF" /tmp/peer/venv/bin/pip install llama-cpp-python==0.3.36
    /tmp/peer/venv/bin/python tools/llama_cpp_peer_bench.py MODEL.gguf /tmp/prompt.txt \
        --threads 2 --batch 256 --gen 60 --runs 3

Prints prompt-processing and decode tokens/s (greedy, flash attention on as llama.cpp's
`auto` resolves it on CPU), medians over the runs.
"""
import argparse
import statistics
import time

from llama_cpp import Llama


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("prompt_file")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--ctx", type=int, default=4096)
    ap.add_argument("--gen", type=int, default=60)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--no-flash-attn", action="store_true")
    a = ap.parse_args()

    llm = Llama(
        model_path=a.model,
        n_ctx=a.ctx,
        n_batch=a.batch,
        n_ubatch=a.batch,
        n_threads=a.threads,
        n_threads_batch=a.threads,
        flash_attn=not a.no_flash_attn,
        verbose=False,
    )
    prompt = open(a.prompt_file, encoding="utf-8").read()
    tokens = llm.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)
    print(f"prompt tokens: {len(tokens)}; threads {a.threads}")
    pp, tg = [], []
    for run in range(a.runs):
        llm.reset()
        t0 = time.perf_counter()
        llm.eval(tokens)
        tp = time.perf_counter() - t0
        out = []
        t1 = time.perf_counter()
        for i in range(a.gen):
            tok = llm.sample(temp=0.0)
            if llm.token_eos() == tok:
                break
            out.append(tok)
            if i + 1 < a.gen:  # like cardinal-llm-local: the last token is not evaluated
                llm.eval([tok])
        td = time.perf_counter() - t1
        pp.append(len(tokens) / tp)
        tg.append(len(out) / td)
        print(f"run {run}: prompt {pp[-1]:.1f} tok/s ({tp:.2f}s), decode {tg[-1]:.1f} tok/s ({len(out)} tok)")
        if run == 0:
            print("answer:", repr(llm.detokenize(out).decode("utf-8", "replace")))
    print(f"MEDIAN prompt {statistics.median(pp):.1f} tok/s, decode {statistics.median(tg):.1f} tok/s")


if __name__ == "__main__":
    main()
