/* What Material's own JavaScript adds to a page, made usable by keyboard and screen reader
   (the browser test runs axe-core on every page):
   - A table wider than its column scrolls inside Material's .md-typeset__scrollwrap. A keyboard
     user can scroll only what can take focus, and a screen reader names only what has a label:
     each wrapper that scrolls becomes a focusable region named after its table's columns
     (scrollable-region-focusable). One that fits takes no tab stop. So does a notebook page's
     code cell (mkdocs-jupyter's .highlight-ipynb), or code in its markdown, wider than its column.
   - A link to a section with no text (link-name) is named after the heading it leads to.
   - A code annotation's marker is a link whose number CSS draws: it gets that number as its
     name (link-name).
   Material adds both after the page loads, and again when the window's width changes what
   scrolls, so this runs on every change to the page, at most once a frame. */
(function () {
  function label(wrap) {
    const heads = [...wrap.querySelectorAll("thead th")].map(th => th.textContent.trim());
    return heads.length ? "Table: " + heads.filter(Boolean).join(", ") : "Table";
  }
  function mark() {
    const scrolling = [...document.querySelectorAll(".md-typeset__scrollwrap"),
                       ...document.querySelectorAll(".jupyter-wrapper .highlight-ipynb"),
                       ...document.querySelectorAll(".jupyter-wrapper .jp-RenderedMarkdown pre")];
    for (const wrap of scrolling) {
      if (wrap.scrollWidth > wrap.clientWidth + 1) {
        wrap.setAttribute("tabindex", "0");
        wrap.setAttribute("role", "region");
        wrap.setAttribute("aria-label", wrap.matches(".highlight-ipynb") ? "Code cell"
                          : wrap.matches("pre") ? "Code" : label(wrap));
      } else {
        ["tabindex", "role", "aria-label"].forEach(a => wrap.removeAttribute(a));
      }
    }
    // A link to a section with no text of its own (on notebook pages, one made for a heading the
    // notebook's HTML left without a slug): named after the heading it leads to
    for (const link of document.querySelectorAll('a[href*="#"]:not([aria-label])')) {
      if (link.textContent.trim() || link.querySelector("img[alt], [aria-label]")) continue;
      const target = document.getElementById(decodeURIComponent(link.hash.slice(1)));
      const text = target ? target.textContent.trim() : "";
      link.setAttribute("aria-label", text ? "Section: " + text : "Link to this section");
    }
    for (const link of document.querySelectorAll("a.md-annotation__index:not([aria-label])")) {
      const number = link.querySelector("[data-md-annotation-id]");
      link.setAttribute("aria-label", "Annotation " + (number ? number.dataset.mdAnnotationId : ""));
    }
  }
  let queued = false;
  function soon() {
    if (!queued) {
      queued = true;
      requestAnimationFrame(() => { queued = false; mark(); });
    }
  }
  document$.subscribe(soon);
  // and when a <details> opens: what it shows may scroll
  new MutationObserver(soon).observe(document.body, {childList: true, subtree: true,
                                                   attributeFilter: ["open"]});
  addEventListener("resize", soon);
})();
