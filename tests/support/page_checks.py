"""What browser tests ask of a rendered page: does it fit its width, where is focus and does
it show. Plain functions over a Playwright page (see tests/support/browser.py)."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import Page


def overflow(page: Page) -> list[str]:
    """What sticks out past the viewport's right edge (empty when the page fits)."""
    return page.evaluate(
        """() => {
          const width = window.innerWidth;
          if (document.documentElement.scrollWidth <= width) return [];
          return [...document.querySelectorAll('body *')]
            .filter(el => el.getBoundingClientRect().right > width + 1)
            .slice(0, 8)
            .map(el => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') + ' ' +
                 Math.round(el.getBoundingClientRect().right));
        }"""
    )


def focused(page: Page) -> dict[str, Any]:
    """The focused element (tag, id, text) and whether its focus shows: an outline of at least
    2 px (`outline`) on a box inside the viewport (`visible`)."""
    return page.evaluate(
        """() => {
          const el = document.activeElement;
          const style = getComputedStyle(el);
          const box = el.getBoundingClientRect();
          return {
            tag: el.tagName.toLowerCase(), id: el.id,
            text: (el.textContent || '').trim().slice(0, 40),
            outline: style.outlineStyle !== 'none' && parseFloat(style.outlineWidth) >= 2,
            visible: box.width > 0 && box.height > 0 && box.bottom > 0 &&
                     box.top < window.innerHeight && box.left >= 0 &&
                     box.right <= window.innerWidth + 1,
          };
        }"""
    )
