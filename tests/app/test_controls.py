"""app_ui/controls.py: what the method option widgets are called."""


def test_option_labels_write_acronyms_and_bit_widths_as_people_do():
    from app_ui.controls import _label

    assert _label("gptq") == "GPTQ"  # not "Gptq"
    assert _label("int8_budget") == "8-bit budget"
    assert _label("block_size") == "Block size"
