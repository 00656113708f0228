/* A table wider than its column scrolls inside Material's .md-typeset__scrollwrap. A keyboard
   user can scroll only what can take focus, and a screen reader names only what has a label: each
   wrapper that scrolls becomes a focusable region named after its table's columns (axe-core's
   scrollable-region-focusable). One that fits takes no tab stop. Runs on every page Material
   shows (document$), and again when the window's width changes what scrolls. */
(function () {
  function label(wrap) {
    const heads = [...wrap.querySelectorAll("thead th")].map(th => th.textContent.trim());
    return heads.length ? "Table: " + heads.filter(Boolean).join(", ") : "Table";
  }
  function mark() {
    for (const wrap of document.querySelectorAll(".md-typeset__scrollwrap")) {
      if (wrap.scrollWidth > wrap.clientWidth + 1) {
        wrap.setAttribute("tabindex", "0");
        wrap.setAttribute("role", "region");
        wrap.setAttribute("aria-label", label(wrap));
      } else {
        ["tabindex", "role", "aria-label"].forEach(a => wrap.removeAttribute(a));
      }
    }
  }
  document$.subscribe(mark);
  let pending;
  addEventListener("resize", () => { clearTimeout(pending); pending = setTimeout(mark, 100); });
})();
