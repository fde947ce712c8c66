"""The peer side of `cardinal bench llm`: llama-cpp-python on the same GGUF, prompt tokens,
context, batch and threads as Cardinal's own llama.cpp run, timed the same way (prompt: one
evaluation of every prompt token in batches; decode: greedy sampling plus one evaluation per
generated token, stopping at end of generation or after --gen tokens). Prints one JSON object
per run on stdout."""

import argparse
import json
import sys
import time

import llama_cpp


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--prompt-file", required=True)
    ap.add_argument("--gen", type=int, required=True)
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--ctx", type=int, required=True)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--flash-attn", choices=["on", "off"], default="off")
    a = ap.parse_args()
    llm = llama_cpp.Llama(
        model_path=a.model,
        n_ctx=a.ctx,
        n_batch=a.batch,
        n_ubatch=a.batch,
        n_threads=a.threads,
        n_threads_batch=a.threads,
        flash_attn=a.flash_attn == "on",
        verbose=False,
    )
    with open(a.prompt_file, encoding="utf-8") as f:
        text = f.read()
    tokens = llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)
    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    for _ in range(a.runs):
        llm.reset()
        t0 = time.perf_counter()
        llm.eval(tokens)
        t1 = time.perf_counter()
        generated = 0
        while generated < a.gen:
            tok = llm.sample(temp=0.0)
            if llama_cpp.llama_vocab_is_eog(vocab, tok):
                break
            generated += 1
            if generated == a.gen:
                break
            llm.eval([tok])
        t2 = time.perf_counter()
        print(
            json.dumps(
                {
                    "version": llama_cpp.__version__,
                    "prompt_tokens": len(tokens),
                    "prompt_seconds": t1 - t0,
                    "generated_tokens": generated,
                    "decode_seconds": t2 - t1,
                }
            ),
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
