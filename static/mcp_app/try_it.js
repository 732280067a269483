// Try it: a field per simple top-level property of the tool's input schema (text, number,
// true/false, a choice), kept in step with the JSON box, which remains what is submitted and
// the only editor for nested values. Schemas this cannot show leave the JSON box alone.
// A string is a multi-line box unless its schema says it is one line: a "format" (date, email,
// uri...) or a maxLength of at most SHORT_STRING characters.
"use strict";
(function () {
  document.addEventListener("DOMContentLoaded", function () {
    const source = document.getElementById("try-it-schema");
    const box = document.getElementById("id_arguments");
    const holder = document.getElementById("try-it-fields");
    if (!source || !box || !holder) return;
    const schema = JSON.parse(source.textContent);
    const properties = (schema && typeof schema.properties === "object") ? schema.properties : {};
    const required = new Set(Array.isArray(schema.required) ? schema.required : []);
    const inputs = {};
    const SHORT_STRING = 80;

    function multiLine(spec) {
      if (typeof spec.format === "string") return false;
      return !(typeof spec.maxLength === "number" && spec.maxLength <= SHORT_STRING);
    }

    function current() {
      try {
        const value = JSON.parse(box.value || "{}");
        return value && typeof value === "object" && !Array.isArray(value) ? value : null;
      } catch (error) {
        return null;
      }
    }

    function kindOf(spec) {
      if (!spec || typeof spec !== "object") return null;
      if (Array.isArray(spec.enum) && spec.enum.every((v) => typeof v === "string")) return "enum";
      return ["string", "integer", "number", "boolean"].includes(spec.type) ? spec.type : null;
    }

    function write(name, value) {
      const args = current();
      if (args === null) return; // the box holds something else: leave it to the user
      if (value === undefined) delete args[name];
      else args[name] = value;
      box.value = JSON.stringify(args, null, 2);
    }

    function read(name, kind, input) {
      if (kind === "boolean") return input.checked;
      if (input.value === "") return undefined;
      if (kind === "integer" || kind === "number") {
        const number = Number(input.value);
        return Number.isNaN(number) ? input.value : number;
      }
      return input.value;
    }

    function show() {
      const args = current();
      if (args === null) return;
      for (const [name, [kind, input]] of Object.entries(inputs)) {
        const value = args[name];
        if (kind === "boolean") input.checked = value === true;
        else input.value = value === undefined || value === null ? "" : String(value);
      }
    }

    for (const [name, spec] of Object.entries(properties)) {
      const kind = kindOf(spec);
      if (!kind) continue;
      const row = document.createElement("div");
      row.className = "form-row";
      const line = document.createElement("div");
      line.className = "flex-container";
      const label = document.createElement("label");
      const id = "try-it-field-" + name;
      label.htmlFor = id;
      label.textContent = name + (required.has(name) ? " *" : "") + ":";
      if (required.has(name)) label.className = "required";
      let input;
      if (kind === "enum") {
        input = document.createElement("select");
        for (const choice of ["", ...spec.enum]) {
          const option = document.createElement("option");
          option.value = choice;
          option.textContent = choice === "" ? "---------" : choice;
          input.appendChild(option);
        }
      } else if (kind === "string" && multiLine(spec)) {
        input = document.createElement("textarea");
        input.rows = 3;
        input.className = "vLargeTextField";
      } else {
        input = document.createElement("input");
        input.type = kind === "boolean" ? "checkbox" : (kind === "string" ? "text" : "number");
        if (kind === "integer") input.step = "1";
        if (kind === "number") input.step = "any";
        if (kind === "string") input.className = "vTextField";
      }
      input.id = id;
      input.addEventListener(kind === "boolean" || kind === "enum" ? "change" : "input", function () {
        write(name, read(name, kind, input));
      });
      inputs[name] = [kind, input];
      line.append(label, input);
      row.appendChild(line);
      if (spec.description) {
        const help = document.createElement("div");
        help.className = "help";
        help.textContent = spec.description;
        row.appendChild(help);
      }
      holder.appendChild(row);
    }
    if (!Object.keys(inputs).length) return;
    holder.hidden = false;
    box.addEventListener("input", show);
    show();
  });
})();
