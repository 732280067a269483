// DRF's modals (the DELETE confirmation; the filters already are) open from <body>: dark mode
// inverts .wrapper > .container with a CSS filter, and a filter makes that box the containing
// block and stacking context of everything fixed inside it, so a modal left there opened
// under Bootstrap's backdrop, where nothing in it could be pressed. api_browsable.css darkens
// the modals themselves.
for (const modal of document.querySelectorAll(".wrapper .modal")) {
  document.body.appendChild(modal);
}
