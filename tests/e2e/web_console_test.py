#!/usr/bin/env python3
"""End-to-end: the web console (router/console/) in Debian's headless Chromium, driven through
PyPI's selenium, against live `tessera serve` processes on the default model. Every host but
127.0.0.1 is unreachable for the browser (--host-resolver-rules), so the page must work from
what the binary serves.

1. `--api-key`: the page asks for the key and sends nothing without it (no request leaves the
   page, the batch view stays empty, and the events route answers 401 to a keyless client).
   Once given the key, the playground streams a greedy answer that equals the API's own answer
   for the same request, shows token counts and tokens/s, and its Stop button cancels a long
   answer (the router counts a cancelled request). The batch view, while 8 concurrent requests
   run, draws steps and at least one bar with a prefill chunk next to decodes; hovering that
   bar shows its step and request ids. No console errors, and every resource came from the
   server's origin.
2. TLS (a certificate made with openssl) and two workers behind the router: the page loads over
   https, answers, shows a gauge row per worker, and draws steps.
3. `--no-web-console`: GET / is 404 and the API still answers.

`--screenshots DIR` saves the two views (docs/console/ holds the committed ones).
Exits non-zero with the reason on any failure.
"""
import argparse
import contextlib
import http.client
import json
import os
import re
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "tools", "pyclient"))
from tessera_process import make_certificate  # noqa: E402

from e2e_checks import check  # noqa: E402

API_KEY = "console-test-key"
QUESTION = "Name three colours."


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin-dir", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--repo", default=os.getcwd())
    parser.add_argument("--screenshots", help="save the views' screenshots here")
    return parser.parse_args()


@contextlib.contextmanager
def serving(bin_dir, model, *extra):
    """`tessera serve` on loopback for the with-block: yields its HTTP address; then SIGTERM and
    a zero exit."""
    proc = subprocess.Popen(
        [os.path.join(bin_dir, "tessera"), "serve", "--model", model, "--port", "0",
         "--http-port", "-1", "--threads", "2", "--kv-cache-mb", "256", *extra],
        stdout=subprocess.PIPE, stderr=sys.stderr, text=True)
    try:
        http_addr = None
        deadline = time.time() + 180
        while time.time() < deadline:
            line = proc.stdout.readline()
            check(line, f"tessera serve exited with {proc.poll()} before it was ready")
            match = re.search(r"tessera serve: (http|listening) on (\S+)", line)
            if match and match.group(1) == "http":
                http_addr = match.group(2)
            elif match:
                break
        check(http_addr, "tessera serve printed no 'http on' line in time")
        yield http_addr
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=90)
    check(code == 0, f"tessera serve exited with {code}")


def http_call(url, body=None, key=None, context=None):
    """(status, body bytes) of GET (or POST JSON `body`) `url`."""
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = "Bearer " + key
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=120, context=context) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def status_only(url):
    """The status of GET `url`, without reading the body (an event stream never ends)."""
    parsed = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=30)
    try:
        connection.request("GET", parsed.path)
        return connection.getresponse().status
    finally:
        connection.close()


def served_model(base, key=None, context=None):
    status, body = http_call(base + "/v1/models", key=key, context=context)
    check(status == 200, f"/v1/models answered {status}")
    return json.loads(body)["data"][0]["id"]


def metric(base, name, context=None):
    """The value of the first series of `name` in the router's /metrics (0 when absent)."""
    status, body = http_call(base + "/metrics", context=context)
    check(status == 200, f"/metrics answered {status}")
    for line in body.decode().splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def start_browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=1400,900", "--no-first-run",
                 # Every other host is unreachable: the page may only use what the binary serves.
                 "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"):
        options.add_argument(flag)
    options.accept_insecure_certs = True  # the TLS run's self-signed certificate
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(executable_path="/usr/bin/chromedriver"),
                            options=options)


def wait_for(what, condition, timeout_s=60, interval_s=0.1):
    """Polls `condition()` until truthy; returns its value, or fails naming `what`."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def set_field(driver, element_id, value):
    element = driver.find_element("id", element_id)
    element.clear()
    element.send_keys(str(value))


def ask(driver, text):
    """Sends `text` in the playground; returns the new assistant message element."""
    before = len(driver.find_elements("css selector", ".message.assistant"))
    set_field(driver, "chat-input", text)
    driver.find_element("id", "send-button").click()
    wait_for("the answer bubble",
             lambda: len(driver.find_elements("css selector", ".message.assistant")) > before)
    return driver.find_elements("css selector", ".message.assistant")[-1]


def meta_of(message):
    return message.find_element("css selector", ".meta").text


def check_without_key(driver, base):
    driver.get(base + "/")
    key_form = driver.find_element("id", "key-form")
    wait_for("the key prompt", key_form.is_displayed, timeout_s=10)
    check("needs an API key" in driver.find_element("id", "status").text,
          "the page did not say it needs an API key")
    driver.find_element("id", "tab-batch").click()
    time.sleep(1.5)
    check(driver.execute_script("return window.tesseraConsole.stepsHeld()") == 0,
          "the batch view got steps without the key")
    check(driver.find_element("id", "model-name").text == "", "the model was shown without key")
    requests = driver.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name)")
    check(not [r for r in requests if "/v1/" in r], f"the page called the API keyless: {requests}")
    status = status_only(base + "/v1/console/events")
    check(status == 401, f"the events route answered {status} without the key, not 401")
    driver.find_element("id", "tab-chat").click()


def enter_key(driver):
    set_field(driver, "api-key", API_KEY)
    driver.find_element("css selector", "#key-form button").click()
    wait_for("the model's name", lambda: driver.find_element("id", "model-name").text)


def check_playground(driver, base, screenshots):
    set_field(driver, "temperature", 0)
    set_field(driver, "max-tokens", 24)
    set_field(driver, "system-prompt", "You are terse.")
    message = ask(driver, QUESTION)
    meta = wait_for("the answer's statistics", lambda: meta_of(message), timeout_s=120)
    check(re.search(r"\d+ prompt tokens · \d+ tokens · [\d.]+ tok/s · first token \d+ ms", meta),
          f"the answer's statistics line is not what was expected: {meta!r}")
    shown = message.find_element("css selector", ".body").text
    model = driver.find_element("id", "model-name").text
    status, body = http_call(base + "/v1/chat/completions", key=API_KEY, body={
        "model": model, "temperature": 0, "top_p": 1, "max_tokens": 24,
        "messages": [{"role": "system", "content": "You are terse."},
                     {"role": "user", "content": QUESTION}]})
    check(status == 200, f"the API answered {status}: {body[:300]!r}")
    want = json.loads(body)["choices"][0]["message"]["content"]
    check(shown.strip() == want.strip(),
          f"the page streamed {shown!r}, the API answered {want!r} for the same request")
    if screenshots:
        driver.save_screenshot(os.path.join(screenshots, "console-playground.png"))


def check_stop_button(driver, base):
    cancelled = metric(base, 'tessera_requests_total{status="cancelled"}')
    set_field(driver, "max-tokens", 2000)
    set_field(driver, "temperature", 0.9)
    message = ask(driver, "Write a very long story about a lighthouse.")
    wait_for("the first tokens", lambda: len(message.find_element("css selector", ".body").text)
             > 10, timeout_s=60)
    driver.find_element("id", "stop-button").click()
    wait_for("the stopped answer's statistics", lambda: "stopped" in meta_of(message),
             timeout_s=30)
    wait_for("the router to count the cancelled request",
             lambda: metric(base, 'tessera_requests_total{status="cancelled"}') > cancelled,
             timeout_s=30)
    check(driver.find_element("id", "send-button").is_enabled(), "Send stayed disabled")


def load(base, count):
    """`count` concurrent chat requests with prompts of different lengths, started 0.15 s apart
    so new prefills land next to running decodes; returns (threads, their statuses)."""
    model = served_model(base, key=API_KEY)
    statuses = []

    def one(i):
        status, _ = http_call(base + "/v1/chat/completions", key=API_KEY, body={
            "model": model, "max_tokens": 40, "temperature": 0.8,
            "messages": [{"role": "user",
                          "content": f"Request {i}: " + "tell me about the sea. " * (4 + 6 * i)}]})
        statuses.append(status)
    threads = []
    for i in range(count):
        thread = threading.Thread(target=one, args=(i,))
        thread.start()
        threads.append(thread)
        time.sleep(0.15)
    return threads, statuses


def mixed_bar(driver):
    bars = driver.execute_script("return window.tesseraConsole.bars()")
    mixed = [b for b in bars if "prefill" in b["kinds"] and "decode" in b["kinds"]]
    return mixed[-1] if mixed else None


def hover(driver, bar):
    """Moves the pointer to the middle of `bar` (viewport pixels are whole: the nearest one to
    the bar's centre line, which a bar 3 px wide or more always holds); returns the tooltip."""
    from selenium.webdriver.common.actions.action_builder import ActionBuilder
    box = driver.execute_script(
        "const b = document.getElementById('steps-canvas').getBoundingClientRect();"
        "return [b.left, b.top];")
    x = round(box[0] + bar["x"])
    y = round(box[1] + (bar["top"] + bar["bottom"]) / 2)
    actions = ActionBuilder(driver)
    actions.pointer_action.move_to_location(x, y)
    actions.perform()
    tooltip = driver.find_element("id", "tooltip")
    wait_for("the tooltip", tooltip.is_displayed, timeout_s=5)
    return tooltip.text


def point_at_chart(driver):
    """Puts the pointer on the chart's top-left corner: the chart holds still while it is there."""
    from selenium.webdriver.common.action_chains import ActionChains
    canvas = driver.find_element("id", "steps-canvas")
    ActionChains(driver).move_to_element_with_offset(
        canvas, 4 - canvas.size["width"] // 2, 4 - canvas.size["height"] // 2).perform()
    wait_for("the chart to hold still", lambda: driver.execute_script(
        "return window.tesseraConsole.frozen()"), timeout_s=5)


def gauge_rows(driver):
    """The gauge table's rows as (worker attribute, cell texts), read in one script: the page
    redraws the table every second, so element references would go stale."""
    return driver.execute_script(
        "return [...document.querySelectorAll('#gauge-rows tr')].map(r => "
        "[r.dataset.worker, [...r.querySelectorAll('td')].map(c => c.textContent)])")


def check_batch_view(driver, base, screenshots):
    driver.find_element("id", "tab-batch").click()
    wait_for("the gauges", lambda: gauge_rows(driver))
    threads, statuses = load(base, 8)
    wait_for("a drawn step with a prefill chunk next to decodes",
             lambda: mixed_bar(driver), timeout_s=120)
    wait_for("40 steps in the view (a fuller picture for the screenshot)",
             lambda: driver.execute_script("return window.tesseraConsole.stepsHeld()") >= 40,
             timeout_s=120)
    point_at_chart(driver)  # the load goes on; the drawn bars stay where they are
    bar = mixed_bar(driver)
    check(bar, "the held chart lost its mixed step")
    text = hover(driver, bar)
    check(f"step {bar['step']}" in text and "prefill" in text and "decode" in text,
          f"the tooltip does not describe the mixed step {bar}: {text!r}")
    check(all(request_id in text for request_id in bar["ids"]),
          f"the tooltip lacks some of the step's requests {bar['ids']}: {text!r}")
    rows = gauge_rows(driver)
    check(len(rows) == 1 and rows[0][0] == "0" and len(rows[0][1]) == 11,
          f"the gauge table is not one worker's row: {rows}")
    if screenshots:
        driver.save_screenshot(os.path.join(screenshots, "console-batch.png"))
    for thread in threads:
        thread.join(timeout=120)
    check(statuses == [200] * 8, f"the load's requests answered {statuses}")


def check_browser_clean(driver, base):
    errors = [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
    check(not errors, f"console errors in Chromium: {errors}")
    names = driver.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name)")
    foreign = [n for n in names if not n.startswith(base)]
    check(not foreign, f"the page loaded resources from elsewhere: {foreign}")


def check_tls(driver, args, directory):
    cert, key = make_certificate(directory)
    with serving(args.bin_dir, args.model, "--tls-cert", cert, "--tls-key", key,
                 "--workers", "2") as http_addr:
        base = "https://" + http_addr
        driver.get(base + "/")
        wait_for("the model's name over TLS", lambda: driver.find_element("id", "model-name").text)
        set_field(driver, "max-tokens", 8)
        message = ask(driver, QUESTION)
        wait_for("the answer over TLS", lambda: meta_of(message), timeout_s=120)
        check(message.find_element("css selector", ".body").text, "no answer over TLS")
        driver.find_element("id", "tab-batch").click()
        context = ssl.create_default_context(cafile=cert)
        status, _ = http_call(base + "/v1/completions", context=context, body={
            "model": served_model(base, context=context), "prompt": "Hello", "max_tokens": 8})
        check(status == 200, f"a completion over TLS answered {status}")
        wait_for("steps drawn over TLS",
                 lambda: driver.execute_script("return window.tesseraConsole.bars().length"))
        two_rows = lambda: (lambda rows: rows if len(rows) == 2 else None)(gauge_rows(driver))
        rows = wait_for("a gauge row per worker", two_rows)
        check([r[0] for r in rows] == ["0", "1"], f"not one gauge row per worker: {rows}")
        check_browser_clean(driver, base)


def check_console_off(args):
    with serving(args.bin_dir, args.model, "--no-web-console") as http_addr:
        base = "http://" + http_addr
        status, _ = http_call(base + "/")
        check(status == 404, f"GET / answered {status} with --no-web-console")
        status, _ = http_call(base + "/v1/models")
        check(status == 200, f"/v1/models answered {status} with --no-web-console")


def main():
    args = parse_args()
    if args.screenshots:
        os.makedirs(args.screenshots, exist_ok=True)
    driver = start_browser()
    try:
        with serving(args.bin_dir, args.model, "--api-key", API_KEY) as http_addr:
            base = "http://" + http_addr
            check_without_key(driver, base)
            enter_key(driver)
            check_playground(driver, base, args.screenshots)
            check_stop_button(driver, base)
            check_batch_view(driver, base, args.screenshots)
            check_browser_clean(driver, base)
        driver.quit()
        driver = start_browser()  # a fresh profile: no key, no history
        with tempfile.TemporaryDirectory() as directory:
            check_tls(driver, args, directory)
    finally:
        driver.quit()
    check_console_off(args)
    print("web_console_test: all checks passed")


if __name__ == "__main__":
    main()
