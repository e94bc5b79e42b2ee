// The problems on screen, inside `root`: elements past the right edge, and text boxes (each
// line of a text node, and each control) that overlap another's by more than a sliver while
// neither holds the other. Only what is drawn counts (visible, not clipped away).
(root) => {
  const scope = document.querySelector(root);
  if (!scope) return [`${root} is not on screen`];
  const name = (el) => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') +
    (el.className && typeof el.className === 'string' ? '.' + el.className.trim().split(/\s+/).join('.') : '');
  const shown = (el) => el.checkVisibility({ checkOpacity: true, checkVisibilityCSS: true }) &&
    !el.closest('.visually-hidden');
  // What of a box is drawn: the part inside every ancestor that clips its overflow (and, for
  // text, inside its own element).
  const drawn = (el, r, self = false) => {
    let [left, top, right, bottom] = [r.left, r.top, r.right, r.bottom];
    for (let up = el; up && up !== document.documentElement; up = up.parentElement) {
      const style = getComputedStyle(up);
      if ((self || up !== el) && (style.overflowX !== 'visible' || style.overflowY !== 'visible')) {
        const c = up.getBoundingClientRect();
        if (style.overflowX !== 'visible') { left = Math.max(left, c.left); right = Math.min(right, c.right); }
        if (style.overflowY !== 'visible') { top = Math.max(top, c.top); bottom = Math.min(bottom, c.bottom); }
      }
      if (style.position === 'fixed') break;
    }
    return { left, top, right, bottom, width: right - left, height: bottom - top };
  };
  const problems = [];
  for (const el of scope.querySelectorAll('*')) {
    if (!shown(el)) continue;
    const r = drawn(el, el.getBoundingClientRect());
    if (r.width > 0 && r.height > 0 && r.right > innerWidth + 1) problems.push(`${name(el)} reaches ${Math.round(r.right)} px`);
  }
  const boxes = [];
  const walker = document.createTreeWalker(scope, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const el = node.parentElement;
    if (!node.textContent.trim() || !el || !shown(el) || el.closest('option, select, script, style')) continue;
    const range = document.createRange();
    range.selectNodeContents(node);
    for (const line of range.getClientRects()) {
      const r = drawn(el, line, true);
      if (r.width > 1 && r.height > 1) boxes.push([el, r, node.textContent.trim().slice(0, 30)]);
    }
  }
  for (const el of scope.querySelectorAll('input, select, textarea, button')) {
    if (!shown(el)) continue;
    const r = drawn(el, el.getBoundingClientRect());
    if (r.width > 1 && r.height > 1) boxes.push([el, r, name(el)]);
  }
  for (let i = 0; i < boxes.length; i++) {
    for (let j = i + 1; j < boxes.length; j++) {
      const [a, ra, ta] = boxes[i], [b, rb, tb] = boxes[j];
      if (a === b || a.contains(b) || b.contains(a)) continue;
      const w = Math.min(ra.right, rb.right) - Math.max(ra.left, rb.left);
      const h = Math.min(ra.bottom, rb.bottom) - Math.max(ra.top, rb.top);
      if (w > 2 && h > 2) problems.push(`"${ta}" (${name(a)}) overlaps "${tb}" (${name(b)})`);
    }
  }
  return problems;
}
