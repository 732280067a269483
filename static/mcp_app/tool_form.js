// Tool and resource template admin forms: show only the config fields of the selected kind.
// Each kind's fields come from its executor (tools) or resolver (resource templates); ToolForm
// and ResourceTemplateForm mark their inputs with data-tool-kind.
(function () {
  "use strict";

  function update(kind) {
    document.querySelectorAll("[data-tool-kind]").forEach(function (input) {
      var row = input.closest(".form-row");
      if (row) {
        row.hidden = input.getAttribute("data-tool-kind") !== kind;
      }
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    var select = document.getElementById("id_kind");
    if (!select) {
      return;
    }
    update(select.value);
    select.addEventListener("change", function () { update(select.value); });
  });
})();
