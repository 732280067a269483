// Copy buttons: <button class="copy" data-copy-target="ID"> copies the text of element ID.
(function () {
  "use strict";

  function fallbackCopy(text) {
    // navigator.clipboard needs a secure context; plain http on a LAN address has none.
    var area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.style.position = "absolute";
    area.style.left = "-9999px";
    document.body.appendChild(area);
    area.select();
    var ok = document.execCommand("copy");
    document.body.removeChild(area);
    return ok ? Promise.resolve() : Promise.reject(new Error("copy failed"));
  }

  function copy(text) {
    if (navigator.clipboard && window.isSecureContext) {
      return navigator.clipboard.writeText(text);
    }
    return fallbackCopy(text);
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest("button.copy");
    if (!button) {
      return;
    }
    var target = document.getElementById(button.getAttribute("data-copy-target"));
    if (!target) {
      return;
    }
    var label = button.textContent;
    copy(target.textContent).then(
      function () { button.textContent = "Copied"; },
      function () { button.textContent = "Press Ctrl+C"; }
    ).then(function () {
      window.setTimeout(function () { button.textContent = label; }, 1500);
    });
  });
})();
