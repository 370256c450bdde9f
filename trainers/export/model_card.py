"""The model card (`README.md`) of an exported model: data, vocabulary, training, scores.

Written from the manifests the steps committed, so it says what the model was actually
trained on, with the sacreBLEU signatures of its scores. No torch here.
"""

from __future__ import annotations

import json
from typing import Any

SEARCH_FLAGS = "--beam 4 --lenpen 1.0 --max-len-a 0 --max-len-b 200"


def _yaml_list(values: list[str]) -> str:
    return "".join(f"- {v}\n" for v in values)


def model_card(facts: dict[str, Any], fmt: str) -> str:
    """Markdown with a Hub metadata header; `facts` as `export.py` gathers them."""
    langs = facts["languages"]
    train, model = facts["train_config"], facts["model_config"]
    vocab, data = facts["vocab"], facts["data"]
    scores = facts.get("scores") or {}
    header = (
        "---\n"
        f"language:\n{_yaml_list([langs['src'], langs['tgt']])}"
        "library_name: transformers\n"
        "pipeline_tag: translation\n"
        f"tags:\n{_yaml_list(['translation', 'marian', 'nmtpipe'])}"
        "---\n\n"
    )
    lines = [
        f"# {langs['src']}→{langs['tgt']} {train.get('arch', 'transformer')}, trained with nmtpipe",
        "",
        f"A {model['encoder_layers']}+{model['decoder_layers']}-layer post-norm Transformer "
        f"(d_model {model['d_model']}, FFN {model['ffn']}, {model['heads']} heads) exported "
        f"from `{facts['checkpoint']}` as {'a MarianMT model' if fmt == 'hf' else fmt}.",
        "",
        "## Data",
        "",
        f"- Encoded dataset `{data['url']}` (fingerprint `{data['fingerprint'][:12]}`), "
        f"prepared from `{data['prepared']}`.",
    ]
    for split, info in sorted(data["splits"].items()):
        lines.append(f"- {split}: {info['pairs']:,} pairs")
    if data.get("normalize"):
        lines.append(
            f"- Normalisation (applied by the tokenizer too): `{json.dumps(data['normalize'])}`"
        )
    lines += [
        "",
        "## Vocabulary",
        "",
        f"- {vocab['model']} ({'joined' if vocab['joined'] else 'per language'}), "
        f"{model['tgt_vocab']:,} ids, fingerprint `{vocab['fingerprint'][:12]}`; "
        "`tokenizer.json` encodes raw text exactly as `nmtpipe decode --input` does.",
        "",
        "## Training",
        "",
        f"- {facts['updates']:,} updates, best validation loss "
        f"{facts['best_valid_loss']:.4f}" if facts.get("best_valid_loss") is not None
        else f"- {facts['updates']:,} updates",
        "- Options: `" + json.dumps({k: v for k, v in train.items() if v is not None},
                                    default=str) + "`",
        "",
        "## Scores",
        "",
    ]  # fmt: skip
    if scores:
        for name in ("bleu", "chrf"):
            if f"{name}_line" in scores:
                lines.append(f"- {scores[f'{name}_line']} (`{scores[f'{name}_signature']}`)")
        lines.append(f"- on {scores.get('input')}, {scores.get('sentences')} sentences")
    else:
        lines.append("- not scored (export with `--scores DECODE_DIR/scores.json`)")
    lines += [
        "",
        "## Use",
        "",
        "```python",
        "from transformers import AutoModelForSeq2SeqLM, AutoTokenizer",
        "",
        'tokenizer = AutoTokenizer.from_pretrained("DIR")',
        'model = AutoModelForSeq2SeqLM.from_pretrained("DIR")',
        'batch = tokenizer(["A sentence to translate."], return_tensors="pt", padding=True)',
        "print(tokenizer.batch_decode(model.generate(**batch), skip_special_tokens=True))",
        "```",
        "",
        f"`generation_config.json` searches as `nmtpipe decode {SEARCH_FLAGS}` does (beam 4, "
        "score / length, 200 tokens at most, then EOS).",
        "",
    ]
    return header + "\n".join(lines)
