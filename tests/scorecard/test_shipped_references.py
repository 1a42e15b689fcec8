"""The reference results that ship with the package, read as a user's scorecard reads them: their
provenance, and the orderings an honest reference table must show where the papers' studies find
them (CAT solving MQAR, and generalizing to 8x the training length where attention does not)."""

from mixerzoo.studies.scorecard.battery import load_battery
from mixerzoo.studies.scorecard.references import load_references
from mixerzoo.studies.scorecard.table import _better

REFS = {card.label: card for card in load_references("quick")}
SMALLEST = "mqar-L64-d64"


def test_the_shipped_references_are_the_batterys_mixers_with_their_provenance():
    battery = load_battery()
    assert {"attention", "cat"} <= set(REFS) <= set(battery.references)
    keys = {i.key for i in battery.preset("quick").items} | {"mad"}
    for card in REFS.values():
        assert card.preset == "quick" and card.made["date"] and card.made["machine"]
        assert set(card.scores) == keys, card.label
        assert all(s.value is not None and s.fingerprints for s in card.scores.values()), card.label
        assert card.efficiency["code"] and len(card.efficiency["tokens_per_s"]) == 4
        assert card.wall_s > 0


def test_cat_solves_mqar_where_the_cat_studies_find_it_does():
    # cat-mqar: CAT solves MQAR at L = 64, d = 64 (CAT Fig. 5); here every MQAR column
    assert REFS["cat"].scores[SMALLEST].value >= 0.99


def test_cat_generalizes_to_8x_the_training_length_where_attention_does_not():
    # CAT-ws Fig. 4 / cat-length-generalization: CAT holds its accuracy at 8L, attention collapses
    cat, attention = REFS["cat"].scores["lengthgen-8x"], REFS["attention"].scores["lengthgen-8x"]
    assert cat.value >= 0.99 and _better(cat, attention), (cat.value, attention.value)


def test_the_python_api_reads_the_references_into_a_table(tmp_path):
    import mixerzoo

    table = mixerzoo.scorecard("gla", results=tmp_path / "none", train=False, quiet=True)
    assert set(table.mixer) == set(REFS)  # nothing read for gla: its reference row stays
    mqar = table[(table.column == SMALLEST) & (table.mixer == "cat")].iloc[0]
    assert mqar["rank"] == 1 and mqar["learned"]
    assert {"value", "se", "chance", "rank", "tie", "state", "stale"} <= set(table.columns)


def test_attention_is_above_base_conv_on_mqar_at_the_smallest_width():
    # Zoology Fig. 2: at d = 64 attention solves MQAR and BaseConv does not
    attention, base_conv = REFS["attention"].scores[SMALLEST], REFS["base_conv"].scores[SMALLEST]
    assert attention.learned and _better(attention, base_conv), (attention.value, base_conv.value)


def test_gated_convolutions_and_recurrences_hold_less_state_than_attention_at_the_longest_length():
    # Zoology's accounting: attention's KV cache grows as 2 L d per layer; a gated convolution's input
    # history is L d, a recurrence's state is fixed
    recall = [i for i in load_battery().preset("quick").items if i.group == "recall"]
    longest = max(recall, key=lambda i: i.cell["data.task.seq_len"]).key
    others = [c for label, c in REFS.items() if label not in ("attention", "cat")]
    assert others, "no gated convolution or recurrence among the shipped references"
    for card in others:
        assert card.scores[longest].state < REFS["attention"].scores[longest].state, card.label
