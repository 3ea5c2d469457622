"""The runs list's filter by tag, tags shown as chips (the list's rows, the run page),
and the start form's tags field (:class:`TagsField`: ``key=value`` lines).

Two filters that work as one: "tag key" offers the keys in use (``?tag_key=customer``,
the runs that carry the key at all); once a key is chosen, "tag: customer" offers that
key's values in use (``?tag=customer:acme``, the runs carrying the tag, the API's
syntax). Both read the keys and values through a loose index scan of ``RunTag``'s
index (:mod:`workflows.queries.tags`), one index probe per item offered and at most
:data:`~workflows.queries.tags.OFFERED_TAG_VALUES` of them, so the page costs the same
at a million runs as at a thousand; a value past those offered is reached by its
address or a chip's link. A malformed ``tag`` (an edited address) is Django's
"incorrect lookup" redirect, not an error page.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from django import forms
from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from workflows.errors import InvalidInput
from workflows.models import Run, RunTag
from workflows.queries.tags import tag_keys, tag_values, tagged
from workflows.tags import checked_tags, key_problem, parse_tag, parse_tags

if TYPE_CHECKING:
    from django.contrib.admin.filters import _ListFilterChoices
    from django.contrib.admin.views.main import ChangeList

__all__ = ["TagFilter", "TagKeyFilter", "TagsField", "tag_chips"]

CHIPS_IN_A_ROW = 3
"""The most chips a row of the runs list shows; the others are counted (``+2``)."""


def _chosen_tag(request: HttpRequest) -> tuple[str, str] | None:
    text = request.GET.get(TagFilter.parameter_name)
    if not text:
        return None
    try:
        return parse_tag(text)
    except InvalidInput as refused:
        raise IncorrectLookupParameters(refused.message) from None


def _chosen_key(request: HttpRequest) -> str:
    """The key whose values the tag filter offers: the chosen tag's, else ``tag_key``."""
    chosen = _chosen_tag(request)
    if chosen is not None:
        return chosen[0]
    key = request.GET.get(TagKeyFilter.parameter_name, "")
    return key if key and key_problem(key) is None else ""


class TagKeyFilter(admin.SimpleListFilter):
    """The tag keys in use; choosing one shows the runs carrying it and lets the tag
    filter offer its values."""

    title = "tag key"
    parameter_name = "tag_key"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(key, key) for key in tag_keys()]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Run]) -> QuerySet[Run]:
        key = self.value()
        if not key:
            return queryset
        if key_problem(key) is not None:
            raise IncorrectLookupParameters(key_problem(key))
        chosen = _chosen_tag(request)
        if chosen is not None and chosen[0] == key:
            return queryset  # the tag filter is narrower
        return queryset.filter(id__in=RunTag.objects.filter(key=key).values("run_id"))

    def choices(self, changelist: ChangeList) -> Iterator[_ListFilterChoices]:
        """Another key drops the chosen tag: its values are another key's."""
        both = [self.parameter_name, TagFilter.parameter_name]
        yield {
            "selected": self.value() is None,
            "query_string": changelist.get_query_string(remove=both),
            "display": "All",
        }
        for key, title in self.lookup_choices:
            yield {
                "selected": self.value() == key,
                "query_string": changelist.get_query_string(
                    {self.parameter_name: key}, remove=[TagFilter.parameter_name]
                ),
                "display": title,
            }


class TagFilter(admin.SimpleListFilter):
    """The runs carrying one tag (``?tag=key:value``); offers the values in use of the
    chosen key (``tag_key``, or the chosen tag's), and nothing until a key is chosen."""

    title = "tag"
    parameter_name = "tag"

    def __init__(self, request: HttpRequest, *args: Any, **kwargs: Any) -> None:
        self.key = _chosen_key(request)
        super().__init__(request, *args, **kwargs)
        if self.key:
            self.title = f"tag: {self.key}"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        if not self.key:
            return []
        offered = [(f"{self.key}:{value}", value or '""') for value in tag_values(self.key)]
        chosen = _chosen_tag(request)
        if chosen is not None and f"{chosen[0]}:{chosen[1]}" not in dict(offered):
            offered.append((f"{chosen[0]}:{chosen[1]}", chosen[1] or '""'))
        return offered

    def queryset(self, request: HttpRequest, queryset: QuerySet[Run]) -> QuerySet[Run]:
        chosen = _chosen_tag(request)
        if chosen is None:
            return queryset
        status = request.GET.get("status__exact")
        return tagged(queryset, dict([chosen]), [status] if status else ())

    def choices(self, changelist: ChangeList) -> Iterator[_ListFilterChoices]:
        """A value keeps its key chosen, so the list of values stays in place."""
        yield {
            "selected": self.value() is None,
            "query_string": changelist.get_query_string(remove=[self.parameter_name]),
            "display": "All",
        }
        for lookup, title in self.lookup_choices:
            yield {
                "selected": self.value() == lookup,
                "query_string": changelist.get_query_string(
                    {self.parameter_name: lookup, TagKeyFilter.parameter_name: self.key}
                ),
                "display": title,
            }


class TagsField(forms.CharField):
    """A run's tags as ``key=value`` lines (each line stripped, blank lines ignored; the
    value is what follows the first ``=``), checked by the rules every surface shares
    (:mod:`workflows.tags`): a bad line is a form error naming it, so nothing is
    started. Cleans to a dict, or ``None`` when no line is given."""

    widget = forms.Textarea(attrs={"rows": 3, "cols": 70, "placeholder": "customer=acme"})

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("required", False)
        kwargs.setdefault("strip", False)
        super().__init__(**kwargs)

    def clean(self, value: Any) -> dict[str, str] | None:
        text = super().clean(value) or ""
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        if not lines:
            return None
        try:
            return checked_tags(parse_tags(lines, separator="=", field="tag"))
        except InvalidInput as refused:
            raise ValidationError(refused.message, code="invalid") from None


def tag_chips(
    tags: Mapping[str, str], *, list_url: str = "", limit: int | None = None
) -> SafeString:
    """``tags`` as chips (``key value``), in key order; each a link to the runs list
    filtered by it when ``list_url`` is given; past ``limit``, a count of the rest."""
    if not tags:
        return SafeString("")
    shown = sorted(tags.items())
    rest = len(shown) - limit if limit is not None and len(shown) > limit else 0
    shown = shown[:limit] if rest else shown

    def href(key: str, value: str) -> str:
        return f"{list_url}?{urlencode({'tag': f'{key}:{value}', 'tag_key': key})}"

    if list_url:
        chips = format_html_join(
            "",
            '<a class="wf-tag" href="{}" title="runs tagged {}={}">'
            '<span class="wf-tag-key">{}</span> {}</a>',
            ((href(key, value), key, value, key, value) for key, value in shown),
        )
    else:
        chips = format_html_join(
            "",
            '<span class="wf-tag"><span class="wf-tag-key">{}</span> {}</span>',
            shown,
        )
    more = format_html('<span class="wf-tag wf-tag-more">+{}</span>', rest) if rest else ""
    return format_html('<span class="wf-tags">{}{}</span>', chips, more)
