"""The dashboard end to end in Chromium: each page works against the real server, passes axe-core
with no serious or critical violation, and is photographed at 1280 and 375 px."""

import csv
import http.server
import io
import re
import threading
import time
import urllib.error
import urllib.request

import pytest
from conftest import Server
from playwright.sync_api import expect

CHROME = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36"


def test_sign_in_refuses_a_wrong_key_then_accepts_the_right_one(dashboard):
    page = dashboard.open()
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    dashboard.check_accessibility("sign-in")
    dashboard.screenshots("sign-in")
    page.get_by_label("API key").fill("sk_wrongwrongwrongwrongwrongwrongwrong")
    # "Skip to content" moves focus into the page without going through the router, which
    # would draw a fresh form (and forget what was typed).
    page.get_by_role("link", name="Skip to content").focus()
    page.keyboard.press("Enter")
    assert page.evaluate("document.querySelector('main').contains(document.activeElement)")
    expect(page.get_by_label("API key")).to_have_value("sk_wrongwrongwrongwrongwrongwrongwrong")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("This key was not accepted")
    expect(page.get_by_label("API key")).to_have_attribute("aria-invalid", "true")
    page.get_by_label("API key").fill(dashboard.server.key)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Links", exact=True)).to_be_visible()
    # The key is in this tab's session storage, and nowhere in the address.
    assert page.evaluate("sessionStorage.getItem('shortlink.apiKey')") == dashboard.server.key
    assert dashboard.server.key not in page.url
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    assert page.evaluate("sessionStorage.getItem('shortlink.apiKey')") is None


def test_create_a_link_find_it_and_download_its_qr_code(dashboard, tmp_path):
    page = dashboard.sign_in()
    page.get_by_role("link", name="New link").click()
    expect(page.get_by_role("heading", name="New link")).to_be_visible()
    dashboard.check_accessibility("link-new")
    dashboard.screenshots("link-new")

    # A refused destination is explained beside its field, and nothing is created.
    page.get_by_label("Destination URL").fill("ftp://example.com/file")
    page.get_by_role("button", name="Create link").click()
    expect(page.locator(".field-error").first).to_contain_text("destination")
    expect(page.get_by_label("Destination URL")).to_have_attribute("aria-invalid", "true")

    # A taken short code (409, which names no field) is explained beside the short code too.
    assert dashboard.server.api("POST", "/links", {"destination": "https://example.com/taken", "customSlug": "e2e-taken"})[0] == 200
    page.get_by_label("Destination URL").fill("https://example.com/e2e/landing?from=dashboard")
    page.get_by_label("Custom short code (optional)").fill("e2e-taken")
    page.get_by_role("button", name="Create link").click()
    expect(page.get_by_label("Custom short code (optional)")).to_have_attribute("aria-invalid", "true")
    expect(page.get_by_label("Custom short code (optional)")).to_be_focused()
    expect(page.locator(".field-error").filter(has_text="already taken")).to_have_count(1)

    page.get_by_label("Custom short code (optional)").fill("e2e-qr")
    page.get_by_role("button", name="Create link").click()
    expect(page.get_by_role("heading", name="Links", exact=True)).to_be_visible()
    row = page.get_by_role("row").filter(has_text="/e2e-qr")
    expect(row).to_contain_text("https://example.com/e2e/landing?from=dashboard")
    status, body = dashboard.server.api("GET", "/links/e2e-qr")
    assert status == 200 and body["data"]["destination"] == "https://example.com/e2e/landing?from=dashboard"
    dashboard.check_accessibility("links")
    dashboard.screenshots("links")

    row.get_by_role("button", name="QR code of e2e-qr").click()
    dialog = page.get_by_role("dialog")
    expect(dialog.get_by_role("img")).to_be_visible()
    dashboard.check_accessibility("qr")
    dashboard.screenshots("qr")
    with page.expect_download() as svg_download:
        dialog.get_by_role("button", name="Download").click()
    svg = tmp_path / "code.svg"
    svg_download.value.save_as(svg)
    assert svg_download.value.suggested_filename == "e2e-qr-qr.svg"
    assert svg.read_text().lstrip().startswith(("<svg", "<?xml")) and 'width="512"' in svg.read_text()

    dialog.get_by_label("Format").select_option("png")
    dialog.get_by_label("Size (pixels)").fill("256")
    expect(dialog.get_by_role("img")).to_have_attribute("src", re.compile("^blob:"))
    expect(dialog.get_by_role("button", name="Download")).to_be_enabled()
    page.wait_for_function("() => document.querySelector('dialog img')?.naturalWidth === 256")
    with page.expect_download() as png_download:
        dialog.get_by_role("button", name="Download").click()
    png = tmp_path / "code.png"
    png_download.value.save_as(png)
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert int.from_bytes(data[16:20], "big") == 256, "a PNG of the chosen size"
    dialog.get_by_role("button", name="Close").click()
    expect(page.get_by_role("dialog")).to_have_count(0)

    # Three visits from a browser: the table shows them once they are counted (within a second).
    for _ in range(3):
        assert dashboard.server.visit("e2e-qr", CHROME) == 302
    deadline = time.monotonic() + 10
    while dashboard.server.api("GET", "/links/e2e-qr")[1]["data"]["clicks"] != 3:
        assert time.monotonic() < deadline, "three clicks were not counted within 10 s"
        time.sleep(0.1)
    page.reload()
    expect(page.get_by_role("row").filter(has_text="/e2e-qr").locator("td.num")).to_have_text("3")


def test_the_qr_dialog_opens_once_and_follows_the_last_choice(dashboard):
    """A double click while the dialog's module loads opens one dialog; an answer that arrives
    after a later one (the format changed meanwhile) is not shown, nor downloaded."""
    assert dashboard.server.api("POST", "/links", {"destination": "https://example.com/qr-race", "customSlug": "e2e-qr-race"})[0] == 200
    page = dashboard.sign_in()
    page.get_by_role("button", name="QR code of e2e-qr-race").dblclick()
    dialog = page.get_by_role("dialog")
    expect(dialog.get_by_role("img")).to_be_visible()
    expect(page.locator("dialog")).to_have_count(1)

    # SVG answers are held back 600 ms: the SVG asked for first arrives after the PNG asked next.
    page.evaluate("""() => {
      const fetch = window.fetch;
      window.slowAnswers = 0;
      window.fetch = async (url, options) => {
        const response = await fetch(url, options);
        if (String(url).includes('format=svg')) {
          await new Promise((resolve) => setTimeout(resolve, 600));
          window.slowAnswers++;
        }
        return response;
      };
    }""")
    dialog.get_by_label("Format").select_option("png")
    expect(dialog.get_by_role("button", name="Download")).to_be_enabled()
    with page.expect_request(lambda r: "format=svg" in r.url):
        dialog.get_by_label("Format").select_option("svg")
    with page.expect_response(lambda r: "format=png" in r.url):
        dialog.get_by_label("Format").select_option("png")
    page.wait_for_function("() => window.slowAnswers === 1")
    page.evaluate("() => new Promise((resolve) => setTimeout(resolve, 50))")
    expect(dialog.get_by_role("button", name="Download")).to_be_enabled()
    with page.expect_download() as download:
        dialog.get_by_role("button", name="Download").click()
    assert download.value.suggested_filename == "e2e-qr-race-qr.png"


def test_edit_a_link_and_see_the_new_destination(dashboard):
    status, _ = dashboard.server.api("POST", "/links", {"destination": "https://example.com/before", "customSlug": "e2e-edit"})
    assert status == 200
    page = dashboard.sign_in()
    page.get_by_role("link", name="Edit e2e-edit").click()
    expect(page.get_by_role("heading", name="Edit e2e-edit")).to_be_visible()
    dashboard.check_accessibility("link-edit")
    dashboard.screenshots("link-edit")
    assert dashboard.server.api("POST", "/links", {"destination": "https://example.com/other", "customSlug": "e2e-other-slug"})[0] == 200
    page.get_by_label("Short code").fill("e2e-other-slug")
    page.get_by_role("button", name="Save changes").click()
    expect(page.get_by_label("Short code")).to_have_attribute("aria-invalid", "true")
    expect(page.locator(".field-error").filter(has_text="'e2e-other-slug' is already taken")).to_have_count(1)
    page.get_by_label("Short code").fill("e2e-edit")
    page.get_by_label("Destination URL").fill("https://example.com/after")
    page.get_by_role("button", name="Save changes").click()
    expect(page.get_by_role("row").filter(has_text="/e2e-edit")).to_contain_text("https://example.com/after")
    assert dashboard.server.api("GET", "/links/e2e-edit")[1]["data"]["destination"] == "https://example.com/after"


def test_a_tag_with_a_comma_stays_whole_when_the_tags_are_edited(dashboard):
    """The API allows a comma in a tag; the form separates tags by commas, but keeps a tag the
    link has whole."""
    link = {"destination": "https://example.com/tagged", "customSlug": "e2e-comma", "tags": ["a,b", "c"]}
    status, _ = dashboard.server.api("POST", "/links", link)
    if status == 400:
        pytest.skip("this server has no link options")
    assert status == 200
    page = dashboard.sign_in()
    page.get_by_role("link", name="Edit e2e-comma").click()
    tags = page.get_by_label("Tags (optional)")
    expect(tags).to_have_value("a,b, c")
    tags.fill("a,b, c, d")
    page.get_by_role("button", name="Save changes").click()
    expect(page.get_by_role("heading", name="Links", exact=True)).to_be_visible()
    assert dashboard.server.api("GET", "/links/e2e-comma")[1]["data"]["tags"] == ["a,b", "c", "d"]


def test_delete_asks_first_and_cancel_keeps_the_link(dashboard):
    status, _ = dashboard.server.api("POST", "/links", {"destination": "https://example.com/doomed", "customSlug": "e2e-doomed"})
    assert status == 200
    page = dashboard.sign_in()
    row = page.get_by_role("row").filter(has_text="/e2e-doomed")
    row.get_by_role("button", name="Delete e2e-doomed").click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text("Delete this link?")
    dashboard.check_accessibility("delete-confirmation")
    dialog.get_by_role("button", name="Cancel").click()
    expect(page.get_by_role("dialog")).to_have_count(0)
    assert dashboard.server.api("GET", "/links/e2e-doomed")[0] == 200

    row.get_by_role("button", name="Delete e2e-doomed").click()
    page.get_by_role("dialog").get_by_role("button", name="Delete link").click()
    expect(page.get_by_role("row").filter(has_text="/e2e-doomed")).to_have_count(0)
    # The button that had focus went with its row: focus is on the page's heading, not lost.
    expect(page.get_by_role("heading", name="Links", exact=True)).to_be_focused()
    assert dashboard.server.api("GET", "/links/e2e-doomed")[0] == 404


def test_import_250_rows_of_which_3_are_bad(dashboard, tmp_path):
    rows = [[f"https://example.com/import/{i}", f"imp-{i}"] for i in range(250)]
    rows[10] = ["not a url", "imp-bad-url"]          # refused destination
    rows[120] = ["https://example.com/import/x", "api"]  # reserved slug
    rows[240] = ["https://example.com/import/y", "imp-3"]  # taken earlier in the file
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\r\n")
    writer.writerow(["destination", "customSlug"])
    writer.writerows(rows)
    file = tmp_path / "links.csv"
    file.write_text(text.getvalue())

    page = dashboard.sign_in()
    page.get_by_role("link", name="Import", exact=True).click()
    expect(page.get_by_role("heading", name="Import links from CSV")).to_be_visible()
    dashboard.check_accessibility("import")
    page.get_by_label("CSV file").set_input_files(file)
    page.get_by_role("button", name="Import", exact=True).click()
    expect(page.get_by_text("247 created, 3 failed, of 250 rows.")).to_be_visible(timeout=30_000)
    progress = page.get_by_role("progressbar", name="Import progress")
    assert progress.get_attribute("value") == progress.get_attribute("max") == "250"
    failed = page.locator("td.state-failed")
    expect(failed).to_have_count(3)
    # Each failed row names its line of the file (header is line 1) and why.
    for line, reason in [(12, "destination"), (122, "reserved"), (242, "imp-3")]:
        row = page.get_by_role("row").filter(has=page.locator("td", has_text=re.compile(f"^{line}$")))
        expect(row.locator("td.state-failed")).to_contain_text(reason)
    expect(page.locator("td.state-created")).to_have_count(247)
    dashboard.check_accessibility("import-results")
    dashboard.screenshots("import-results")
    assert dashboard.server.api("GET", "/links/imp-249")[0] == 200
    assert dashboard.server.api("GET", "/links/imp-bad-url")[0] == 404


def test_failed_rows_downloaded_twice_keep_one_error_column(dashboard, tmp_path):
    """A download of the failed rows, fixed in part and imported again: its `error` column gets
    the new reason, rather than a second `error` column after it."""
    file = tmp_path / "first.csv"
    file.write_text("destination,customSlug\r\n"
                    "https://example.com/dl/ok,e2e-dl-ok\r\n"
                    "not a url,e2e-dl-bad\r\n"
                    "https://example.com/dl/api,api\r\n")
    page = dashboard.sign_in()
    page.get_by_role("link", name="Import", exact=True).click()

    def import_and_download(path, summary):
        page.get_by_label("CSV file").set_input_files(path)
        page.get_by_role("button", name="Import", exact=True).click()
        expect(page.get_by_text(summary)).to_be_visible()
        with page.expect_download() as download:
            page.get_by_role("button", name="Download the failed rows").click()
        saved = tmp_path / f"failed-{path.stem}.csv"
        download.value.save_as(saved)
        return list(csv.reader(io.StringIO(saved.read_text(), newline="")))

    first = import_and_download(file, "1 created, 2 failed, of 3 rows.")
    assert first[0] == ["destination", "customSlug", "error"], first
    assert [row[:2] for row in first[1:]] == [["not a url", "e2e-dl-bad"], ["https://example.com/dl/api", "api"]]
    assert "destination" in first[1][2] and "reserved" in first[2][2], first

    # The reserved slug is swapped for one taken by the first import: that row fails anew.
    first[2][1] = "e2e-dl-ok"
    again = tmp_path / "again.csv"
    with again.open("w", newline="") as out:
        csv.writer(out, lineterminator="\r\n").writerows(first)
    second = import_and_download(again, "0 created, 2 failed, of 2 rows.")
    assert second[0] == ["destination", "customSlug", "error"], second
    assert all(len(row) == 3 for row in second), second
    assert second[1] == first[1], "the same failure, the same reason"
    assert second[2][:2] == ["https://example.com/dl/api", "e2e-dl-ok"], second
    assert "e2e-dl-ok" in second[2][2] and "reserved" not in second[2][2], second


def test_a_double_click_on_import_imports_once(dashboard, tmp_path):
    file = tmp_path / "twice.csv"
    file.write_text("destination,customSlug\n" + "".join(f"https://example.com/twice/{i},e2e-twice-{i}\n" for i in range(3)))
    page = dashboard.sign_in()
    page.get_by_role("link", name="Import", exact=True).click()
    page.get_by_label("CSV file").set_input_files(file)
    bulk = []
    page.on("request", lambda r: bulk.append(r.url) if r.url.endswith("/links/bulk") else None)
    page.get_by_role("button", name="Import", exact=True).dblclick()
    expect(page.get_by_text("3 created, 0 failed, of 3 rows.")).to_be_visible()
    page.wait_for_load_state("networkidle")
    assert len(bulk) == 1, bulk
    expect(page.get_by_text("3 created, 0 failed, of 3 rows.")).to_be_visible()


def test_import_waits_out_the_rate_limit_and_loses_nothing(dashboard, tmp_path):
    """A workspace allowed 1 request a second: the pages wait for Retry-After and go on."""
    server = dashboard.server
    server.cli("workspace", "create", "slow", "--rate-limit", "1")
    key = server.cli("key", "create", "--workspace", "slow")
    file = tmp_path / "slow.csv"
    file.write_text("destination\n" + "".join(f"https://example.com/slow/{i}\n" for i in range(150)))
    page = dashboard.sign_in(key)
    # The landing page's own requests are done (they wait out the limit too) before the import.
    expect(page.locator(".stat dd").first).to_have_text("0", timeout=15_000)
    expect(page.locator(".stat dd").last).to_have_text(re.compile("^(0|—)$"), timeout=15_000)
    page.get_by_role("link", name="Import", exact=True).click()
    page.get_by_label("CSV file").set_input_files(file)
    page.get_by_role("button", name="Import", exact=True).click()
    expect(page.get_by_text("150 created, 0 failed, of 150 rows.")).to_be_visible(timeout=30_000)


def test_analytics_take_turns_within_a_rate_limit_of_one_a_second(dashboard):
    """The analytics page asks nine things at once: at 1 request a second they wait their turns
    (all at once, they collided again at every retry and the page gave up)."""
    server = dashboard.server
    server.cli("workspace", "create", "one-a-second", "--rate-limit", "1")
    page = dashboard.sign_in(server.cli("key", "create", "--workspace", "one-a-second"))
    expect(page.locator(".stat dd").first).to_have_text("0", timeout=15_000)
    page.get_by_role("link", name="Analytics", exact=True).click()
    expect(page.get_by_role("heading", name="Analytics of the workspace")).to_be_visible()
    referrers = page.get_by_role("region", name="Referrers")
    expect(referrers).to_contain_text("No clicks in this period.", timeout=30_000)
    expect(page.get_by_role("alert")).to_have_count(0)


def test_a_path_no_page_can_have_is_not_found(dashboard):
    """`%E0%A4%A` decodes to no character: the page says so, rather than failing to prepare."""
    page = dashboard.sign_in()
    page.goto(f"{dashboard.server.base}/#/links/%E0%A4%A/edit")
    expect(page.get_by_role("heading", name="Page not found")).to_be_visible()


def test_a_webhook_without_events_is_refused_beside_them(dashboard):
    """The API's refusal of no events is shown beside the events, and focus goes to the first."""
    page = dashboard.sign_in()
    page.get_by_role("link", name="Webhooks").click()
    page.get_by_label("Endpoint URL").fill("http://127.0.0.1:9/no-events")
    for box in page.get_by_role("group", name="Events").get_by_role("checkbox").all():
        box.uncheck()
    page.get_by_role("button", name="Add endpoint").click()
    expect(page.locator("#events-anchor-error")).not_to_be_empty()
    expect(page.get_by_role("group", name="Events").get_by_role("checkbox").first).to_be_focused()


def test_signing_in_while_the_address_waits_shows_the_key_being_checked(browser, tmp_path):
    """Past 20 failed keys a minute, an address waits its turn even with the right key: the form
    says the key is being checked, without the last refusal, and cannot send it twice."""
    server = Server(tmp_path)  # a server of its own: its failed-login budget is spent here
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(f"{server.base}/#/links")
        page.get_by_label("API key").fill("sk_wrongwrongwrongwrongwrongwrongwrong")
        page.get_by_role("button", name="Sign in").click()
        expect(page.get_by_role("alert")).to_contain_text("This key was not accepted")
        for _ in range(25):
            request = urllib.request.Request(f"{server.base}/api/v1/links",
                                             headers={"Authorization": "Bearer sk_nope"})
            try:
                urllib.request.urlopen(request, timeout=10)
            except urllib.error.HTTPError:
                pass
        page.get_by_label("API key").fill(server.key)
        page.get_by_role("button", name="Sign in").click()
        expect(page.get_by_role("status").filter(has_text="Checking the key…")).to_be_visible()
        expect(page.get_by_role("button", name="Sign in")).to_be_disabled()
        expect(page.get_by_text("This key was not accepted")).to_have_count(0)
        expect(page.get_by_role("heading", name="Links", exact=True)).to_be_visible(timeout=30_000)
    finally:
        context.close()
        server.stop()


def test_create_a_webhook_and_see_its_secret_only_once(dashboard):
    page = dashboard.sign_in()
    page.get_by_role("link", name="Webhooks").click()
    expect(page.get_by_role("heading", name="Webhooks")).to_be_visible()
    page.get_by_label("Endpoint URL").fill("http://127.0.0.1:9/e2e-hook")
    page.get_by_label("link.updated").uncheck()
    page.get_by_label("link.deleted").uncheck()
    page.get_by_role("button", name="Add endpoint").click()
    secret = page.get_by_role("status", name="Signing secret")
    expect(secret).to_have_text(re.compile(r"^whsec_[A-Za-z0-9+/=]{40,}$"))
    value = secret.text_content()
    page.get_by_role("button", name="Copy secret").click()
    assert page.evaluate("navigator.clipboard.readText()") == value
    expect(page.get_by_role("row").filter(has_text="http://127.0.0.1:9/e2e-hook")).to_be_visible()
    dashboard.check_accessibility("webhooks-secret")
    dashboard.screenshots("webhooks-secret")

    page.get_by_role("button", name="I have saved it").click()
    expect(page.get_by_text(value)).to_have_count(0)
    expect(page.get_by_role("heading", name="Webhooks")).to_be_focused()
    page.reload()
    expect(page.get_by_role("row").filter(has_text="http://127.0.0.1:9/e2e-hook")).to_be_visible()
    assert value not in page.content(), "the secret is never shown again"

    # A link created now is an event for the endpoint; nothing listens on port 9, so its
    # delivery is pending (retried later) or failed, never delivered.
    status, created = dashboard.server.api("POST", "/links", {"destination": "https://example.com/hooked"})
    assert status == 200
    page.get_by_role("link", name="Deliveries to http://127.0.0.1:9/e2e-hook").click()
    expect(page.get_by_role("heading", name="Deliveries")).to_be_visible()
    delivery = page.get_by_role("row").filter(has_text="link.created").first
    expect(delivery.locator("td.state-pending, td.state-failed")).to_be_visible()
    expect(page.locator("td.state-delivered")).to_have_count(0)
    dashboard.check_accessibility("deliveries")
    dashboard.screenshots("deliveries")
    page.get_by_label("State").select_option("delivered")
    page.get_by_role("button", name="Apply").click()
    expect(page.get_by_text("No deliveries with state delivered.")).to_be_visible()

    page.get_by_role("link", name="Back to the webhooks").click()
    page.get_by_role("button", name="Delete http://127.0.0.1:9/e2e-hook").click()
    page.get_by_role("dialog").get_by_role("button", name="Delete endpoint").click()
    expect(page.get_by_role("row").filter(has_text="http://127.0.0.1:9/e2e-hook")).to_have_count(0)
    expect(page.get_by_role("heading", name="Webhooks")).to_be_focused()
    hooks = dashboard.server.api("GET", "/webhooks")[1]["data"]
    assert all(h["targetUrl"] != "http://127.0.0.1:9/e2e-hook" for h in (hooks if isinstance(hooks, list) else hooks["items"]))


def test_load_more_deliveries_on_a_double_click_loads_each_page_once(dashboard):
    server = dashboard.server
    status, created = server.api("POST", "/webhooks", {"targetUrl": "http://127.0.0.1:9/e2e-many", "events": ["link.created"]})
    assert status == 200
    hook = created["data"]["id"]
    try:
        assert server.api("POST", "/links/bulk", [{"destination": f"https://example.com/hook/{i}"} for i in range(25)])[0] == 200
        # Deliveries are queued from the creations' events, moments after the answer.
        deadline = time.monotonic() + 10
        while len(server.api("GET", f"/webhooks/{hook}/deliveries?limit=100")[1]["data"]["items"]) < 25:
            assert time.monotonic() < deadline, "25 deliveries were not queued within 10 s"
            time.sleep(0.1)
        page = dashboard.sign_in()
        page.goto(f"{server.base}/#/webhooks/{hook}")
        # The links page stays until the deliveries page is rendered, and its table matches too.
        expect(page.get_by_role("heading", name="Deliveries")).to_be_visible()
        rows = page.locator("table.cards tbody tr")
        expect(rows).to_have_count(20)
        page.get_by_role("button", name="Load more").dblclick()
        expect(rows).to_have_count(25)
        page.wait_for_load_state("networkidle")
        events = rows.locator("td:first-child").all_text_contents()
        assert len(events) == len(set(events)) == 25
    finally:
        server.api("DELETE", f"/webhooks/{hook}")


def test_analytics_page_explains_what_the_server_answers(dashboard):
    """Until the server has analytics, the page says so in words; with it, the chart shows."""
    status, _ = dashboard.server.api("POST", "/links", {"destination": "https://example.com/stats", "customSlug": "e2e-stats"})
    assert status == 200
    page = dashboard.sign_in()
    page.get_by_role("link", name="Analytics of e2e-stats").click()
    expect(page.get_by_role("heading", name="Analytics of e2e-stats")).to_be_visible()
    # The API answers either the chart or, on a server without analytics, a message that says so.
    expect(page.locator(".chart svg").or_(page.get_by_role("alert"))).to_be_visible()
    if page.get_by_role("alert").count():
        expect(page.get_by_role("alert")).to_contain_text("does not offer analytics yet")
    dashboard.check_accessibility("analytics")
    dashboard.screenshots("analytics")


def test_load_more_walks_the_pages_without_repeating_a_link(dashboard):
    bulk = [{"destination": f"https://example.com/page/{i}"} for i in range(45)]
    status, body = dashboard.server.api("POST", "/links/bulk", bulk)
    assert status == 200 and all("link" in item for item in body["data"])
    page = dashboard.sign_in()
    rows = page.locator("table.cards tbody tr")
    expect(rows).to_have_count(20)
    page.get_by_role("button", name="Load more").click()
    expect(rows).to_have_count(40)
    page.get_by_role("button", name="Load more").click()
    expect(rows).not_to_have_count(40)
    urls = rows.locator("td:first-child a").all_text_contents()
    assert len(urls) == len(set(urls)) >= 45


def test_totals_count_archived_links_and_their_clicks(dashboard):
    """Archived links still redirect, and their clicks are in "last 30 days": the totals count
    them too, so "all time" is never below it."""
    server = dashboard.server
    status, created = server.api("POST", "/links", {"destination": "https://example.com/shelved", "customSlug": "e2e-shelved", "archived": True})
    if status != 200:
        pytest.skip("this server does not accept link options (archived, …) yet")
    for _ in range(2):
        assert server.visit("e2e-shelved", CHROME) == 302
    deadline = time.monotonic() + 10
    while server.api("GET", "/links/e2e-shelved")[1]["data"]["clicks"] != 2:
        assert time.monotonic() < deadline, "two clicks were not counted within 10 s"
        time.sleep(0.1)
    links, clicks, cursor = 0, 0, ""
    while True:
        page_ = server.api("GET", f"/links?limit=100&archived=true{cursor}")[1]["data"]
        links += len(page_["items"])
        clicks += sum(link["clicks"] for link in page_["items"])
        if not page_["nextCursor"]:
            break
        cursor = f"&cursor={page_['nextCursor']}"
    page = dashboard.sign_in()
    expect(page.locator(".stat").filter(has_text="Links").locator("dd")).to_have_text(f"{links:,}")
    expect(page.locator(".stat").filter(has_text="Clicks, all time").locator("dd")).to_have_text(f"{clicks:,}")


def test_dark_mode_follows_the_system(dashboard):
    status, _ = dashboard.server.api("POST", "/links", {"destination": "https://example.com/dark", "customSlug": "e2e-dark"})
    assert status == 200
    dashboard.page.emulate_media(color_scheme="dark")
    page = dashboard.sign_in()
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert background == "rgb(18, 20, 26)", background
    expect(page.get_by_role("row").filter(has_text="/e2e-dark")).to_be_visible()
    dashboard.check_accessibility("links-dark")
    dashboard.screenshots("links-dark")
    # The confirmation's danger button is readable on the dark theme too.
    page.get_by_role("row").filter(has_text="/e2e-dark").get_by_role("button", name=re.compile("Delete")).first.click()
    expect(page.locator("dialog[open]")).to_be_visible()
    dashboard.check_accessibility("delete-dialog-dark")
    page.keyboard.press("Escape")


def test_keyboard_alone_reaches_and_works_the_controls(dashboard):
    """Tab order follows the page, focus is visible, and a dialog opened by keyboard closes with
    Escape and gives focus back."""
    status, _ = dashboard.server.api("POST", "/links", {"destination": "https://example.com/keys", "customSlug": "e2e-keys"})
    assert status == 200
    page = dashboard.sign_in()
    # After navigation the page's heading has focus, so Tab continues from there.
    assert page.evaluate("document.activeElement.textContent") == "Links"
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Import CSV"
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "New link"
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline == "solid", "focus is visible"
    button = page.get_by_role("button", name="QR code of e2e-keys")
    button.focus()
    page.keyboard.press("Enter")
    expect(page.get_by_role("dialog")).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.get_by_role("dialog")).to_have_count(0)
    assert page.evaluate("document.activeElement.getAttribute('aria-label')") == "QR code of e2e-keys"

    # "Skip to content" lands in the page it is on, not on "Page not found".
    page.get_by_role("link", name="Skip to content").focus()
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Links", exact=True)).to_be_focused()
    assert page.url.endswith("#/links")


def test_a_long_destination_takes_three_lines_of_its_row(dashboard):
    """A destination of 3,000 characters: three lines in the table, the whole in its title."""
    destination = "https://example.com/" + "d" * 2980
    status, _ = dashboard.server.api("POST", "/links", {"destination": destination, "customSlug": "e2e-long-dest"})
    assert status == 200
    page = dashboard.sign_in()
    cell = page.get_by_role("row").filter(has_text="/e2e-long-dest").locator(".destination .clamp")
    expect(cell).to_have_attribute("title", destination)
    expect(cell).to_have_text(destination)
    # Three lines at the page's font size; unclamped, the row ran to thousands of pixels.
    font = float(cell.evaluate("(c) => parseFloat(getComputedStyle(c).fontSize)"))
    assert cell.bounding_box()["height"] <= 3 * 1.5 * font, (cell.bounding_box(), font)


def test_a_long_short_code_leaves_the_actions_on_one_line(dashboard):
    """A 64-character short code wraps in its cell at 1280 px rather than pushing a row's five
    actions onto several lines."""
    slug = "e2e-wide-" + "w" * 55
    status, _ = dashboard.server.api("POST", "/links", {"destination": "https://example.com/wide", "customSlug": slug})
    assert status == 200
    page = dashboard.sign_in()
    row = page.get_by_role("row").filter(has_text=slug)
    expect(row.get_by_role("button", name=f"Delete {slug}")).to_be_visible()
    tops = {round(b.bounding_box()["y"]) for b in row.locator(".actions > *").all()}
    assert len(tops) == 1, tops
    for width in (1024, 800):
        page.set_viewport_size({"width": width, "height": 900})
        assert page.evaluate("[...document.querySelectorAll('.table-wrap')].every((w) => w.scrollWidth <= w.clientWidth)"), width


def test_a_phone_shows_long_tags_short_codes_and_chart_labels_whole(dashboard):
    """At 375 px: a tag of 50 characters wraps inside its card, a 64-character short code in
    the workspace's ranking of links stays inside its panel, and the chart's labels can be read."""
    server = dashboard.server
    if not has_analytics(server):
        pytest.skip("this server has no /api/v1/analytics yet")
    slug = "e2e-narrow-" + "x" * 53
    tag = "Newsletter-Summer-Campaign-2026-Members-Worldwide-"
    status, _ = server.api("POST", "/links", {"destination": "https://example.com/narrow", "customSlug": slug, "tags": [tag]})
    if status != 200:
        pytest.skip("this server does not accept link options (tags, …) yet")
    assert server.visit(slug, CHROME) == 302
    dashboard.page.set_viewport_size({"width": 375, "height": 900})
    page = dashboard.sign_in()
    page.get_by_label("Search").fill("e2e-narrow")
    page.get_by_role("button", name="Apply").click()
    row = page.get_by_role("row").filter(has_text=slug)
    button = row.get_by_role("button", name=f"Show links tagged {tag}")
    expect(button).to_be_visible()
    # Nothing runs past the cards' frame (which would clip it, or scroll it sideways).
    frame, chip = page.locator(".table-wrap").bounding_box(), button.bounding_box()
    assert chip["x"] + chip["width"] <= frame["x"] + frame["width"], (chip, frame)
    assert page.evaluate("[...document.querySelectorAll('.table-wrap')].every((w) => w.scrollWidth <= w.clientWidth)")

    page.get_by_role("link", name="Analytics", exact=True).click()
    expect(page.get_by_role("region", name="Links").get_by_role("link", name=slug)).to_be_visible()
    overflowing = page.evaluate("[...document.querySelectorAll('.breakdown')].filter((b) => b.scrollWidth > b.clientWidth).map((b) => b.getAttribute('aria-label'))")
    assert overflowing == []
    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    # Labels of the chart drawn at the phone's width, not shrunk from a wider drawing.
    page.wait_for_function("() => [...document.querySelectorAll('.chart text')].every((t) => t.getBoundingClientRect().height >= 10)", timeout=5_000)
    dashboard.check_accessibility("analytics-workspace-narrow")

    # The pages and dialogs named after the link wrap its code too.
    for route in ("edit", "analytics"):
        page.goto(f"{server.base}/#/links/{slug}/{route}")
        expect(page.get_by_role("heading", level=1)).to_contain_text(slug)
        assert page.evaluate("document.documentElement.scrollWidth") <= 375, route
    page.goto(f"{server.base}/#/links")
    page.get_by_label("Search").fill("e2e-narrow")
    page.get_by_role("button", name="Apply").click()
    for opens in ("QR code", "Delete"):
        page.get_by_role("row").filter(has_text=slug).get_by_role("button", name=re.compile(opens)).first.click()
        dialog = page.locator("dialog[open]")
        expect(dialog).to_be_visible()
        assert dialog.evaluate("(d) => d.scrollWidth <= d.clientWidth"), opens
        page.keyboard.press("Escape")


def test_a_tag_filters_the_list_or_says_why_not(dashboard):
    """With link options on the server, clicking a tag lists that tag's links; without them, the
    API's refusal of `tag` is shown in words."""
    status, body = dashboard.server.api("POST", "/links", {"destination": "https://example.com/tagged", "customSlug": "e2e-tagged", "tags": ["spring"]})
    page = dashboard.sign_in()
    if status == 200:
        page.get_by_role("button", name="Show links tagged spring").first.click()
        expect(page.get_by_role("row").filter(has_text="/e2e-tagged")).to_be_visible()
        expect(page.get_by_role("row").filter(has_text="/e2e-qr")).to_have_count(0)
    else:
        assert status == 400 and body["error"]["details"][0]["field"] == "tags", body
        page.get_by_label("Tag").fill("spring")
        page.get_by_role("button", name="Apply").click()
        expect(page.get_by_role("alert")).to_contain_text("need a server with link options")


def test_a_page_that_does_not_exist_says_so(dashboard):
    page = dashboard.sign_in()
    page.goto(f"{dashboard.server.base}/#/nowhere")
    expect(page.get_by_role("heading", name="Page not found")).to_be_visible()


def test_a_page_whose_code_cannot_be_fetched_says_so(dashboard):
    """With the server gone, a page never visited cannot load its module: the page says so
    instead of staying as it was."""
    page = dashboard.sign_in()
    page.route("**/assets/js/webhooks.js", lambda route: route.abort())
    page.get_by_role("link", name="Webhooks").click()
    expect(page.get_by_role("heading", name="This page could not be loaded")).to_be_focused()
    expect(page.get_by_role("alert")).to_contain_text("The server could not be reached")
    dashboard.check_accessibility("page-not-loaded")


def test_first_paint_of_twenty_links_from_a_cold_cache(browser, server, report):
    """Measured and reported (target ≤ 300 ms), not asserted: timings belong to benchmarks. Five
    loads, each in a fresh browser context (an empty cache); the median is the figure."""
    for i in range(20):
        assert server.api("POST", "/links", {"destination": f"https://example.com/paint/{i}"})[0] == 200
    timings = []
    for _ in range(5):
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        context.add_init_script(f"sessionStorage.setItem('shortlink.apiKey', {server.key!r})")
        # The first frame after the twentieth row is in the document: the table's first paint.
        context.add_init_script("""
          new MutationObserver((_, observer) => {
            if (document.querySelectorAll('table.cards tbody tr').length >= 20) {
              observer.disconnect();
              requestAnimationFrame(() => setTimeout(() => { window.__painted = performance.now(); }));
            }
          }).observe(document, {childList: true, subtree: true});
        """)
        page = context.new_page()
        page.goto(f"{server.base}/")
        page.wait_for_function("() => window.__painted", timeout=10_000)
        timings.append(page.evaluate("window.__painted"))
        context.close()
    timings.sort()
    report(f"first paint of the links table with 20 links, cold cache: median {timings[2]:.0f} ms, "
           f"min {timings[0]:.0f}, max {timings[-1]:.0f} (target 300 ms)")


def test_the_chart_and_the_csv_reader_on_known_input(dashboard):
    """The page's own modules on fixed input, in the browser: the chart's points and labels, the
    breakdown bars, and RFC 4180 quoting, both ways."""
    page = dashboard.sign_in()
    result = page.evaluate("""async () => {
      const { timeSeriesChart, breakdown } = await import('/assets/js/chart.js');
      const { parseCsv, csvLine } = await import('/assets/js/csv.js');
      const points = [0, 3, 1, 7].map((clicks, i) => ({ start: `2026-11-0${i + 1}T00:00:00Z`, clicks, uniqueVisitors: clicks }));
      const chart = timeSeriesChart(points, 'day');
      const bars = breakdown('Countries', [{ key: 'GB', clicks: 4 }, { key: null, clicks: 2 }]);
      const picked = [];
      const pickable = breakdown('Devices', [{ key: 'desktop', clicks: 3 }, { key: null, clicks: 1 }], (key) => picked.push(key));
      document.querySelector('main').append(chart, bars, pickable);
      const buttons = pickable.querySelectorAll('button');
      buttons[0].click();
      const rows = parseCsv('\\ufeffdestination,customSlug\\r\\n"https://e.com/?a=1,2","x""y"\\n\\nhttps://e.com/b,\\n');
      return {
        line: chart.querySelector('polyline').getAttribute('points').split(' ').length,
        dots: chart.querySelectorAll('circle').length,
        ticks: [...chart.querySelectorAll('text.tick')].map((t) => t.textContent),
        label: chart.querySelector('svg').getAttribute('aria-label'),
        rows: rows.map((r) => [r.line, r.cells]),
        back: csvLine(['a,b', 'say "hi"', 'plain']),
        widths: [...bars.querySelectorAll('.bar span')].map((s) => s.style.width),
        keys: [...bars.querySelectorAll('li > span:first-child')].map((s) => s.textContent),
        buttons: [...buttons].map((b) => b.getAttribute('aria-label')),
        picked,
      };
    }""")
    assert result["line"] == 4 and result["dots"] == 4
    assert result["ticks"] == ["0", "5", "10"], "the click axis is labelled"
    assert result["label"].startswith("Clicks per day: 11 clicks from") and "with 7" in result["label"]
    assert result["rows"] == [
        [1, ["destination", "customSlug"]],
        [2, ["https://e.com/?a=1,2", 'x"y']],
        [4, ["https://e.com/b", ""]],
    ]
    assert result["back"] == '"a,b","say ""hi""",plain\r\n'
    assert result["widths"] == ["100%", "50%"]
    assert result["keys"] == ["GB", "Unknown"]
    assert result["buttons"] == ["Only desktop (Devices)"] and result["picked"] == ["desktop"]
    dashboard.check_accessibility("chart")


IPHONE = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1"


def has_analytics(server):
    return server.api("GET", "/analytics?groupBy=count")[0] == 200


def has_link_options(server):
    status, body = server.api("POST", "/links", {"destination": "https://example.com/probe", "tags": ["probe"]})
    if status == 200:
        server.api("DELETE", f"/links/{body['data']['id']}")
    return status == 200


def test_analytics_chart_and_breakdowns_follow_clicks(dashboard, tmp_path):
    server = dashboard.server
    if not has_analytics(server):
        pytest.skip("this server has no /api/v1/analytics yet")
    assert server.api("POST", "/links", {"destination": "https://example.com/counted", "customSlug": "e2e-counted"})[0] == 200
    for agent in [CHROME, CHROME, CHROME, IPHONE, IPHONE]:
        assert server.visit("e2e-counted", agent, "https://news.example/story") == 302
    deadline = time.monotonic() + 10
    while server.api("GET", "/analytics?groupBy=count&linkId=e2e-counted")[1]["data"]["clicks"] != 5:
        assert time.monotonic() < deadline, "five clicks were not recorded within 10 s"
        time.sleep(0.2)

    page = dashboard.sign_in()
    page.get_by_role("link", name="Analytics of e2e-counted").click()
    # The links page has "Clicks" stats of its own: wait for the analytics page first.
    expect(page.get_by_role("heading", name="Analytics of e2e-counted")).to_be_visible()
    stat = page.locator(".stat").filter(has_text="Clicks")
    expect(stat.locator("dd")).to_have_text("5")
    expect(page.get_by_role("img", name=re.compile(r"^Clicks per day: 5 clicks"))).to_be_visible()
    devices = page.get_by_role("region", name="Devices")
    expect(devices.locator("li").filter(has_text="desktop")).to_contain_text("3 clicks")
    expect(devices.locator("li").filter(has_text="mobile")).to_contain_text("2 clicks")
    expect(page.get_by_role("region", name="Browsers")).to_contain_text("Chrome")
    expect(page.get_by_role("region", name="Referrers")).to_contain_text("news.example")
    dashboard.check_accessibility("analytics-with-data")
    dashboard.screenshots("analytics-with-data")

    # Picking an entry filters everything by it; removing the filter brings the rest back.
    # Focus goes to the chip that undoes the choice, then (no chip left) to the heading.
    page.get_by_role("button", name="Only desktop (Devices)").click()
    expect(stat.locator("dd")).to_have_text("3")
    expect(page.get_by_role("button", name="Remove the filter device desktop")).to_be_focused()
    page.get_by_role("button", name="Remove the filter device desktop").click()
    expect(stat.locator("dd")).to_have_text("5")
    expect(page.get_by_role("heading", name="Analytics of e2e-counted")).to_be_focused()

    page.get_by_label("Interval").select_option("hour")
    page.get_by_label("Range").select_option("1")
    page.get_by_role("button", name="Show").click()
    expect(page.get_by_role("img", name=re.compile(r"^Clicks per hour: 5 clicks"))).to_be_visible()

    # The export is of what the page shows: dates typed but not applied with "Show" are not used.
    page.get_by_label("Range").select_option("custom")
    page.get_by_label("From", exact=True).fill("2001-01-01")
    page.get_by_label("To (inclusive)").fill("2001-01-02")
    with page.expect_download() as export:
        page.get_by_role("button", name="Export CSV").click()
    file = tmp_path / "export.csv"
    export.value.save_as(file)
    rows = list(csv.reader(file.open()))
    assert rows[0] == ["timestamp", "linkId", "shortCode", "country", "city", "device", "browser", "os", "referrer", "referrerUrl"]
    assert len(rows) == 6 and {r[2] for r in rows[1:]} == {"e2e-counted"}

    # The workspace's "Links" ranking names each link by its short code, and leads to its page.
    page.get_by_role("link", name="Analytics", exact=True).click()
    expect(page.get_by_role("heading", name="Analytics of the workspace")).to_be_visible()
    page.get_by_role("region", name="Links").get_by_role("link", name="e2e-counted", exact=True).click()
    expect(page.get_by_role("heading", name="Analytics of e2e-counted")).to_be_visible()


def test_create_a_link_with_options_and_find_it_by_search_and_tag(dashboard):
    server = dashboard.server
    if not has_link_options(server):
        pytest.skip("this server does not accept link options (tags, expiresAt, …) yet")
    page = dashboard.sign_in()
    page.get_by_role("link", name="New link").click()
    page.get_by_label("Destination URL").fill("https://example.com/options")
    page.get_by_label("Custom short code (optional)").fill("e2e-options")
    page.get_by_label("Tags (optional)").fill("launch, e2e")
    page.get_by_label("Maximum clicks").fill("100")
    # A date without its time is no date-time: said so, rather than a link without expiry.
    page.get_by_label("Expires at").focus()
    page.keyboard.type("01012099")
    assert page.get_by_label("Expires at").evaluate("input => input.validity.badInput")
    page.get_by_role("button", name="Create link").click()
    expect(page.get_by_label("Expires at")).to_have_attribute("aria-invalid", "true")
    expect(page.get_by_label("Expires at")).to_be_focused()
    assert server.api("GET", "/links/e2e-options")[0] == 404
    page.get_by_label("Expires at").fill("2099-01-01T12:00")
    page.get_by_label("Redirect type").select_option("301")
    page.get_by_label("Password").fill("open sesame")
    page.get_by_label("Title").fill("Options")
    page.get_by_label("Destinations by country").fill("GB https://example.co.uk/options")
    page.get_by_role("button", name="Create link").click()
    expect(page.get_by_role("heading", name="Links", exact=True)).to_be_visible()
    link = server.api("GET", "/links/e2e-options")[1]["data"]
    assert link["tags"] == ["launch", "e2e"] and link["maxClicks"] == 100 and link["redirectType"] == 301
    assert link["passwordProtected"] is True and "password" not in link
    assert link["geo"] == {"GB": "https://example.co.uk/options"} and link["title"] == "Options"
    assert link["expiresAt"].startswith("2099-01-01")

    page.get_by_label("Search").fill("e2e-opt")
    page.get_by_role("button", name="Apply").click()
    expect(page.locator("table.cards tbody tr")).to_have_count(1)
    expect(page.get_by_role("row").filter(has_text="/e2e-options")).to_be_visible()
    page.get_by_label("Search").fill("")
    page.get_by_role("button", name="Show links tagged launch").click()
    expect(page.get_by_role("row").filter(has_text="/e2e-options")).to_be_visible()
    expect(page.locator("table.cards tbody tr")).to_have_count(1)

    # Archived: gone from the list, back with the toggle.
    page.get_by_role("link", name="Edit e2e-options").click()
    page.get_by_label("Archived (hidden from the list; still redirects)").check()
    page.get_by_role("button", name="Save changes").click()
    expect(page.get_by_role("heading", name="Links", exact=True)).to_be_visible()
    expect(page.get_by_role("row").filter(has_text="/e2e-options")).to_have_count(0)
    page.get_by_label("Show archived links").check()
    page.get_by_role("button", name="Apply").click()
    expect(page.get_by_role("row").filter(has_text="/e2e-options")).to_contain_text("archived")

    # A bad option is explained beside its field.
    page.get_by_role("link", name="Edit e2e-options").click()
    page.get_by_label("Expires at").fill("")
    page.get_by_label("After expiry, redirect to").fill("not a url")
    page.get_by_role("button", name="Save changes").click()
    expect(page.get_by_label("After expiry, redirect to")).to_have_attribute("aria-invalid", "true")


def test_import_with_option_columns(dashboard, tmp_path):
    if not has_link_options(dashboard.server):
        pytest.skip("this server does not accept link options (tags, expiresAt, …) yet")
    file = tmp_path / "options.csv"
    file.write_text("destination,customSlug,tags,maxClicks,archived\r\n"
                    "https://example.com/o1,e2e-o1,a|b,5,yes\r\n"
                    "https://example.com/o2,e2e-o2,,zero,\r\n"
                    "https://example.com/o3,e2e-o3,,,maybe\r\n")
    page = dashboard.sign_in()
    page.get_by_role("link", name="Import", exact=True).click()
    page.get_by_label("CSV file").set_input_files(file)
    page.get_by_role("button", name="Import", exact=True).click()
    expect(page.get_by_text("1 created, 2 failed, of 3 rows.")).to_be_visible()
    failed = page.locator("td.state-failed")
    expect(failed.first).to_contain_text("maxClicks")
    # An `archived` cell that is no yes or no fails its row, rather than publishing the link.
    expect(failed.last).to_contain_text('archived must be true or false (or yes/no, 1/0), not "maybe"')
    created = dashboard.server.api("GET", "/links/e2e-o1")[1]["data"]
    assert created["tags"] == ["a", "b"] and created["archived"] is True
    assert dashboard.server.api("GET", "/links/e2e-o3")[0] == 404


def test_the_api_docs_page_shows_the_operations_under_its_policy(dashboard):
    # The fixture fails the test on any console error, a Content-Security-Policy violation first.
    page = dashboard.page
    response = page.goto(f"{dashboard.server.base}/docs")
    policy = response.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in policy and "script-src 'self'" in policy, policy
    expect(page.get_by_text("/api/v1/links/bulk").first).to_be_visible()
    expect(page.locator(".opblock").first).to_be_visible()


def test_a_visitor_unlocks_a_password_link_and_reaches_its_destination(browser, server):
    if not has_link_options(server):
        pytest.skip("this server does not accept link options (password, …) yet")

    class Landing(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = b"<!doctype html><title>Landing</title><p>reached</p>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    # Another origin than the short link's, as every destination is.
    landing = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Landing)
    threading.Thread(target=landing.serve_forever, daemon=True).start()
    destination = f"http://localhost:{landing.server_address[1]}/landing"
    status, created = server.api("POST", "/links", {
        "destination": destination, "customSlug": "e2e-locked", "password": "open sesame"})
    assert status == 200, created
    context = browser.new_context(user_agent=CHROME)
    page = context.new_page()
    problems = []
    # The wrong password's 403 logs a failed resource; a blocked redirect logs a policy error.
    page.on("console", lambda m: m.type == "error" and "Failed to load resource" not in m.text
            and problems.append(m.text))
    try:
        page.goto(f"{server.base}/e2e-locked")
        page.get_by_label("Password").fill("wrong")
        page.get_by_role("button", name="Continue").click()
        expect(page.get_by_text("That password is not right")).to_be_visible()
        page.get_by_label("Password").fill("open sesame")
        page.get_by_role("button", name="Continue").click()
        # The form's answer is a redirect to the destination: the page's policy lets it through.
        expect(page).to_have_url(destination)
        expect(page.get_by_text("reached")).to_be_visible()
    finally:
        context.close()
        landing.shutdown()
    assert not problems, problems
    deadline = time.monotonic() + 10
    while server.api("GET", "/links/e2e-locked")[1]["data"]["clicks"] != 1:
        assert time.monotonic() < deadline, "the unlocked visit was not counted"
        time.sleep(0.1)
