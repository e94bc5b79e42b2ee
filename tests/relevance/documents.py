"""The product set's PDF and DOCX, built from the text below, byte for byte the same each time.

`python -m tests.relevance.documents` writes them into the set's workspace; a test checks that
the committed files are what this builds, so an edit here is committed with its files.
"""

from __future__ import annotations

import io
import zipfile
from datetime import datetime
from pathlib import Path

from tests.samples import make_pdf

FILES = Path(__file__).resolve().parent / "product" / "workspace" / "files"
# Zip members carry a modification time; a fixed one keeps the DOCX's bytes reproducible.
ZIP_TIME = (2026, 10, 15, 9, 0, 0)

AGREEMENT_PDF = "acquiring-agreement-summary-2027.pdf"
AGREEMENT_PAGES = [
    "Acquiring agreement summary\n"
    "Fernhill Payments GmbH and Banco Atlântico Merchant Services\n"
    "\n"
    "Effective 1 January 2027 for a term of 36 months.\n"
    "Pricing: interchange plus plus. Acquirer markup 0.18% plus EUR 0.05 per transaction,\n"
    "scheme fees passed through at cost.\n"
    "Settlement: T+1 in EUR to the Fernhill settlement account at Banco Atlântico.\n"
    "Rolling reserve: none while chargebacks stay below 0.5% of transactions per month.",
    "Chargebacks: a fee of EUR 15 per chargeback, waived when the dispute is won.\n"
    "Termination: either party may terminate with 90 days written notice.\n"
    "An early termination fee of EUR 25,000 applies in the first contract year.\n"
    "Service levels: authorisation availability of 99.95% per calendar month;\n"
    "service credits of 5% of the monthly fees for each 0.1% below it.\n"
    "Signed for Fernhill by Sam Whitfield, CFO, on 28 October 2026.",
]

POLICY_DOCX = "incident-response-policy.docx"
POLICY_TITLE = "Incident response policy"
POLICY_PARAGRAPHS = [
    "Version 3.2, approved by Rafael Costa on 2026-10-15. Applies to every Fernhill engineer "
    "and to on-call staff in support.",
    "Severity levels",
]
POLICY_SEVERITIES = [
    ["Severity", "Meaning", "Response"],
    ["SEV1", "Customer money or data at risk, or payments down for every merchant",
     "Page the incident commander at once; status page within 15 minutes"],
    ["SEV2", "A product or a region degraded for many merchants",
     "Incident commander within 30 minutes; status page within an hour"],
    ["SEV3", "One merchant affected, or a degraded internal tool",
     "Handled by the on-call engineer in working hours"],
]  # fmt: skip
POLICY_CLOSING = [
    "Personal data breaches are reported to the supervisory authority within 72 hours of "
    "discovery, as GDPR Article 33 requires. The data protection officer decides whether the "
    "people affected are told as well.",
    "The incident commander owns communication: engineers fix, they do not post updates.",
    "Every SEV1 and SEV2 gets a blameless postmortem within five working days.",
]


def agreement_pdf() -> bytes:
    return make_pdf(AGREEMENT_PAGES)


def policy_docx() -> bytes:
    import docx

    document = docx.Document()
    document.core_properties.title = POLICY_TITLE
    document.core_properties.author = "Rafael Costa"
    document.core_properties.created = datetime(2026, 10, 15, 9, 0)
    document.core_properties.modified = datetime(2026, 10, 15, 9, 0)
    document.add_heading(POLICY_TITLE, level=1)
    document.add_paragraph(POLICY_PARAGRAPHS[0])
    document.add_heading(POLICY_PARAGRAPHS[1], level=2)
    grid = document.add_table(rows=len(POLICY_SEVERITIES), cols=len(POLICY_SEVERITIES[0]))
    for r, row in enumerate(POLICY_SEVERITIES):
        for c, value in enumerate(row):
            grid.cell(r, c).text = value
    for text in POLICY_CLOSING:
        document.add_paragraph(text)
    saved = io.BytesIO()
    document.save(saved)
    return _fixed_zip_times(saved.getvalue())


def _fixed_zip_times(data: bytes) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(out, "w") as target:
        for member in source.infolist():
            info = zipfile.ZipInfo(member.filename, date_time=ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            target.writestr(info, source.read(member))
    return out.getvalue()


def documents() -> dict[str, bytes]:
    """File name -> bytes, for every generated file of the set."""
    return {AGREEMENT_PDF: agreement_pdf(), POLICY_DOCX: policy_docx()}


if __name__ == "__main__":
    for name, data in documents().items():
        (FILES / name).write_bytes(data)
        print(f"wrote {FILES / name} ({len(data):,} bytes)")
