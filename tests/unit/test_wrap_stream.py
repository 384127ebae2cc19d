from sparkctl.core.fmt import wrap_stream


def feed(chunks, width):
    col, out = 0, []
    for c in chunks:
        text, col = wrap_stream(c, col, width)
        out.append(text)
    return "".join(out)


def test_no_line_exceeds_width_and_words_survive():
    text = feed([" word"] * 500, 40)
    lines = text.split("\n")
    assert max(len(line) for line in lines) <= 40
    assert text.replace("\n", " ").split() == ["word"] * 500


def test_existing_newlines_reset_the_column():
    assert feed(["abc\ndef", "gh"], 5) == "abc\ndefgh"


def test_long_word_is_split():
    text = feed(["x" * 25], 10)
    assert text.split("\n") == ["x" * 10, "x" * 10, "x" * 5]
