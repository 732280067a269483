// Tool admin form: show only the implementation fields of the selected kind.
(function () {
  "use strict";

  var FIELDS_BY_KIND = {
    python: ["function"],
    template: ["template", "template_output"],
    http: [
      "http_method", "http_url", "http_query", "http_headers", "http_body",
      "http_body_template", "http_timeout", "http_retries", "http_expected_status",
      "http_select", "http_credential", "http_allow_hosts", "http_allow_networks",
    ],
  };

  function row(name) {
    var input = document.getElementById("id_" + name);
    return input ? input.closest(".form-row") : null;
  }

  function update(kind) {
    Object.keys(FIELDS_BY_KIND).forEach(function (each) {
      FIELDS_BY_KIND[each].forEach(function (name) {
        var element = row(name);
        if (element) {
          element.hidden = each !== kind;
        }
      });
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
