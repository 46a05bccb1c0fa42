#!/usr/bin/env python3
"""Runs llama-server on the mistral3 fixture models and writes NAME.json.

Usage: make_reference.py LLAMA_SERVER MODEL_DIR OUT_DIR
MODEL_DIR holds mistral3-NAME.gguf as
`go test ./internal/model/llama -run TestMistral3FixtureWrite -mistral3.write MODEL_DIR` writes them.
"""
import hashlib
import json
import os
import subprocess
import sys
import time
import urllib.request

PROMPT = [1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426,
          338, 401, 396, 267, 337, 322, 265, 282, 295, 433, 335, 311, 374, 419, 426]
STEPS = 32
VOCAB = 512
PORT = 18931


def post(path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{PORT}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.load(r)


def wait_ready(proc):
    for _ in range(600):
        if proc.poll() is not None:
            raise SystemExit("llama-server exited")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{PORT}/health", timeout=2) as r:
                if r.status == 200:
                    return
        except Exception:
            pass
        time.sleep(0.5)
    raise SystemExit("llama-server did not start")


def run(server, path):
    cmd = [server, "-m", path, "-fa", "off", "-ctk", "f32", "-ctv", "f32", "-t", "2", "-c", "512",
           "-np", "1", "--no-warmup", "--port", str(PORT)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_ready(proc)
        res = post("/completion", {"prompt": PROMPT, "n_predict": STEPS, "n_probs": VOCAB,
                                   "temperature": 0, "top_k": 1, "cache_prompt": False,
                                   "return_tokens": True})
    finally:
        proc.terminate()
        proc.wait()
    probs = res["completion_probabilities"]
    ids = [p["id"] for p in probs]
    if len(ids) != STEPS or ids != res["tokens"]:
        raise SystemExit(f"{path}: {len(ids)} steps with distributions, tokens {res['tokens']}")
    first = [None] * VOCAB
    for e in probs[0]["top_logprobs"]:
        first[e["id"]] = e["logprob"]
    if any(v is None for v in first):
        raise SystemExit(f"{path}: the first step lacks some ids")
    top2 = [[[e["id"], e["logprob"]] for e in p["top_logprobs"][:2]] for p in probs]
    return {"command": " ".join(["llama-server"] + cmd[1:2] + [os.path.basename(path)] + cmd[3:]),
            "prompt": PROMPT, "first_step_logprobs": first, "greedy_ids": ids, "greedy_top2": top2,
            "greedy_min_margin": min(t[0][1] - t[1][1] for t in top2)}


def main():
    server, models, out = sys.argv[1:4]
    for name in sorted(os.listdir(models)):
        if not (name.startswith("mistral3-") and name.endswith(".gguf")):
            continue
        path = os.path.join(models, name)
        data = open(path, "rb").read()
        ref = {"model": {"file": name, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}}
        ref.update(run(server, path))
        case = name[len("mistral3-"):-len(".gguf")]
        with open(os.path.join(out, case + ".json"), "w") as f:
            json.dump(ref, f, indent=1)
            f.write("\n")
        print(case, "greedy", ref["greedy_ids"], "min margin", ref["greedy_min_margin"])


if __name__ == "__main__":
    main()
