"""A short generated "ReAct" paper, a page a topic: the document the follow-up tests (chat, the
web page) ask about, built with ``docgen.make_pdf``."""

TITLE = "ReAct: Synergizing Reasoning and Acting in Language Models"
PAGES = [
    [
        ("h1", TITLE),
        (
            "p",
            "ReAct is a prompting method for large language models. ReAct interleaves "
            "reasoning traces and task-specific actions: the reasoning traces help the model "
            "induce, track and update its plan, and the actions let it consult external "
            "sources such as a Wikipedia API.",
        ),
    ],
    [
        ("h2", "Baselines"),
        (
            "p",
            "Chain-of-thought prompting reasons without acting and hallucinates facts. Standard "
            "prompting reaches 28.7 exact match on HotpotQA, and chain-of-thought prompting "
            "reaches 29.4 exact match on HotpotQA.",
        ),
    ],
    [
        ("h2", "Results on HotpotQA"),
        (
            "p",
            "On HotpotQA, ReAct combined with chain-of-thought self-consistency reaches 35.1 "
            "exact match, the best of all prompting methods, and ReAct is grounded in the "
            "facts it retrieves from Wikipedia.",
        ),
    ],
    [
        ("h2", "ALFWorld"),
        (
            "p",
            "On ALFWorld, a text game of household tasks, ReAct succeeds in 71 percent of the "
            "games, against 37 percent for imitation learning from expert trajectories.",
        ),
    ],
    [
        ("h2", "WebShop"),
        (
            "p",
            "On WebShop, an online shopping environment, ReAct reaches a success rate of 40 "
            "percent, ten points above the previous best method.",
        ),
    ],
]
