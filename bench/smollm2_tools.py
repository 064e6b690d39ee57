"""Can the bundled SmolLM2-135M-Instruct call tools? The evidence behind refusing them
(docs/engine.md, "Tools"; issue 14, item 7).

    python bench/smollm2_tools.py [--model DIR]

Its own chat template never renders `tools`, so through vLLM they would be dropped unseen.
This gives the model the best chance instead: the tools and the SmolLM2 family's tool-call
format (`<tool_call>[{"name": ..., "arguments": {...}}]</tool_call>`, which vLLM's `xlam` parser
reads) in the system turn, ten one-tool questions, greedy decoding (transformers, CPU), and
counts answers that parse as tool calls, name the right function and give its required
arguments. `--model` defaults to the checkpoint `costgate serve` prepares.
"""

from __future__ import annotations

import argparse
import json
import re

TOOLS = [
    {
        "name": "get_weather",
        "description": "Get the current weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
    {
        "name": "convert_currency",
        "description": "Convert an amount between currencies",
        "parameters": {
            "type": "object",
            "properties": {"amount": {"type": "number"}, "from": {"type": "string"}, "to": {"type": "string"}},
            "required": ["amount", "from", "to"],
        },
    },
    {
        "name": "search_web",
        "description": "Search the web for a query",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    },
]
SYSTEM = (
    "You are an expert in composing functions. You are given a question and a set of possible functions. "
    "Based on the question, make one or more function calls to achieve the purpose. If none of the "
    "functions can be used, say so.\nYou have access to the following tools:\n<tools>"
    + json.dumps(TOOLS)
    + "</tools>\nAnswer with the calls only, in exactly this format:\n"
    '<tool_call>[\n{"name": "func_name1", "arguments": {"argument1": "value1"}}\n]</tool_call>'
)
CASES = [
    ("What's the weather in Paris?", "get_weather"),
    ("Is it raining in Tokyo right now?", "get_weather"),
    ("How warm is it in Berlin today?", "get_weather"),
    ("Convert 100 US dollars to euros.", "convert_currency"),
    ("How many yen is 50 GBP?", "convert_currency"),
    ("Search the web for the latest Python release.", "search_web"),
    ("Find news about the Mars rover.", "search_web"),
    ("What's the temperature in Oslo?", "get_weather"),
    ("Change 20 EUR into CHF.", "convert_currency"),
    ("Look up who won the 2018 World Cup.", "search_web"),
]
REQUIRED = {t["name"]: set(t["parameters"]["required"]) for t in TOOLS}


def parse_calls(text: str) -> list[dict] | None:
    match = re.search(r"<tool_call>(.*?)</tool_call>", text, re.S) or re.search(r"(\[\s*\{.*\}\s*\])", text, re.S)
    try:
        calls = json.loads(match.group(1)) if match else None
    except ValueError:
        return None
    return calls if isinstance(calls, list) and all(isinstance(c, dict) and "name" in c for c in calls) else None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="costgate-data/models/SmolLM2-135M-Instruct")
    args = parser.parse_args()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.bfloat16)
    counts = {"tool calls": 0, "right function": 0, "required arguments": 0}
    for question, wanted in CASES:
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]
        ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt")
        ids = ids if isinstance(ids, torch.Tensor) else ids["input_ids"]
        text = tokenizer.decode(
            model.generate(ids, max_new_tokens=60, do_sample=False)[0][ids.shape[1] :], skip_special_tokens=True
        )
        calls = parse_calls(text) or []
        right = [c for c in calls if c.get("name") == wanted]
        counts["tool calls"] += bool(calls)
        counts["right function"] += bool(right)
        counts["required arguments"] += any(REQUIRED[wanted] <= set(c.get("arguments") or {}) for c in right)
        print(json.dumps({"question": question, "answer": text[:120]}))
    print(", ".join(f"{name} {n}/{len(CASES)}" for name, n in counts.items()))


if __name__ == "__main__":
    main()
