// Times on the page are written in UTC by the server; show each in the viewer's own time zone
// (the exact instant stays in the element's datetime attribute and its title).
"use strict";

const LocalTime = (() => {
  const format = new Intl.DateTimeFormat(undefined, {
    year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", timeZoneName: "short",
  });

  function apply(root = document) {
    for (const node of root.querySelectorAll("time.local-time[datetime]:not([data-local])")) {
      const when = new Date(node.getAttribute("datetime"));
      if (Number.isNaN(when.getTime())) continue;
      node.title = node.textContent;
      node.textContent = format.format(when);
      node.dataset.local = "true";
    }
  }

  apply();
  return { apply };
})();
