"""Every value of the chart is documented once, in values.yaml, and the schema's descriptions and
docs/chart.md's table are generated from it (devtools/draftgen_dev/chart_values.py)."""

import json

import yaml

from draftgen_dev import chart_values


def test_every_value_has_a_comment_and_the_schema_and_the_table_say_the_same():
    values_text = chart_values.VALUES.read_text()
    schema = json.loads(chart_values.SCHEMA.read_text())
    assert chart_values.problems(values_text, schema) == []
    assert schema == chart_values.described(values_text, schema), (
        "values.schema.json's descriptions differ from values.yaml's comments: "
        "python -m draftgen_dev.chart_values --write")
    doc = chart_values.DOC.read_text()
    assert doc == chart_values.documented(doc, values_text, schema), (
        "docs/chart.md's values table is stale: python -m draftgen_dev.chart_values --write")


def test_every_key_of_the_schema_is_in_values_yaml():
    """A value the schema allows but values.yaml lacks would be undocumented (global is Helm's own)."""
    schema = json.loads(chart_values.SCHEMA.read_text())
    walked = {path for path, *_ in chart_values.walk(schema, yaml.safe_load(chart_values.VALUES.read_text()))}

    def keys(node, prefix=""):
        for key, child in chart_values.resolve(schema, node).get("properties", {}).items():
            yield f"{prefix}{key}"
            if isinstance(chart_values.resolve(schema, child).get("properties"), dict):
                yield from keys(child, f"{prefix}{key}.")
    assert set(keys(schema)) - {"global"} == walked
