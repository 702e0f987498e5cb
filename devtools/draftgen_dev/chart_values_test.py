from draftgen_dev.chart_values import comments

VALUES = """\
# The image.
image:
  # Where it is.
  repository: ""
  tag: ""  # empty: the appVersion

  pullPolicy: IfNotPresent
# Not this one's: a blank line follows.

replicas: 2
"""


def test_a_keys_description_is_the_comment_above_it_and_its_inline_comment():
    assert comments(VALUES) == {"image": "The image.", "image.repository": "Where it is.",
                                "image.tag": "empty: the appVersion"}
