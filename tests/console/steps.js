// SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause
//
// A small runner for tests that are one story in order (the browser test)
// or a list of checks (the unit tests): each named step runs after the one
// before; once a step of a story fails, the ones after it are counted as
// failed without running, since they stand on it. The end is a line in
// Check's format ("NN%: Checks: X, Failures: Y, Errors: Z"), which
// scripts/test-counts.sh adds to the C suites' counts, and the exit status.
'use strict';

class Steps {
  constructor(name, { story = false } = {}) {
    this.name = name;
    this.story = story;
    this.list = [];
  }

  step(title, fn) {
    this.list.push({ title, fn });
  }

  async run() {
    let passed = 0, failed = 0, broken = false;
    for (const s of this.list) {
      if (broken) {
        failed++;
        console.log(`${this.name}: not run (an earlier step failed): ${s.title}`);
        continue;
      }
      const t0 = Date.now();
      try {
        await s.fn();
        passed++;
        console.log(`${this.name}: passed (${Date.now() - t0} ms): ${s.title}`);
      } catch (e) {
        failed++;
        console.log(`${this.name}: FAILED: ${s.title}: ${e && e.stack ? e.stack : e}`);
        if (this.story) broken = true;
      }
    }
    const n = passed + failed;
    const pct = n ? Math.floor((passed * 100) / n) : 100;
    console.log(`${pct}%: Checks: ${n}, Failures: ${failed}, Errors: 0`);
    return failed === 0;
  }
}

module.exports = { Steps };
