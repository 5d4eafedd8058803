"""How the SQS backend puts text on the wire and reads AWS's errors."""

from __future__ import annotations

import re

# Characters SQS refuses in a body; they can only occur inside JSON strings,
# where a \\u escape denotes the same text.
_NOT_ALLOWED = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def sqs_text(data: bytes) -> str:
    """UTF-8 JSON ``data`` as SQS takes it: characters it refuses as ``\\u`` escapes."""
    return _NOT_ALLOWED.sub(lambda match: f"\\u{ord(match[0]):04x}", data.decode("utf-8"))


def unwrap(code: str, message: str) -> tuple[str, str]:
    """Code and message of an error some servers send as an XML document."""
    if "<Code>" in message:
        found_code = re.search(r"<Code>(.*?)</Code>", message)
        found_message = re.search(r"<Message>(.*?)</Message>", message, re.DOTALL)
        code = found_code[1] if found_code else code
        message = found_message[1] if found_message else message
    return code, message
