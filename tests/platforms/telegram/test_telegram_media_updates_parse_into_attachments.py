"""A Telegram message's photo (its largest size), document, voice, audio and video parse
into typed `Attachment`s (reference: the ``file_id``), its caption is its text, and a
malformed media field is refused naming the field (issue 25)."""

from __future__ import annotations

from typing import Any

import pytest
from channelkit.attachments import Attachment, AttachmentKind
from channelkit.errors import UpdateParseError
from channelkit.platforms.telegram.ingress import parse_update


def _update(**fields: Any) -> dict[str, Any]:
    message = {"message_id": 7, "date": 0, "chat": {"id": 1, "type": "private"}, **fields}
    return {"update_id": 1, "message": message}


def test_the_largest_photo_size_is_the_attachment_and_the_caption_the_text() -> None:
    photo = [
        {"file_id": "small", "file_unique_id": "a", "width": 90, "height": 90, "file_size": 900},
        {"file_id": "big", "file_unique_id": "b", "width": 1280, "height": 960},
        {"file_id": "mid", "file_unique_id": "c", "width": 320, "height": 240, "file_size": 9000},
    ]
    photo[1]["file_size"] = 90_000  # the largest is not always listed last
    message = parse_update(_update(photo=photo, caption="what is this?")).message
    assert message is not None
    assert message.text == "what is this?"
    assert message.attachments == (
        Attachment(AttachmentKind.IMAGE, "photo.jpg", "big", size=90_000),
    )


def test_a_document_voice_audio_and_video_each_become_an_attachment() -> None:
    message = parse_update(
        _update(
            document={
                "file_id": "d",
                "file_unique_id": "1",
                "file_name": "q3.pdf",
                "mime_type": "application/pdf",
                "file_size": 10,
            },
            voice={"file_id": "v", "file_unique_id": "2", "duration": 3, "mime_type": "audio/ogg"},
            audio={"file_id": "a", "file_unique_id": "3", "duration": 200, "file_name": "song.mp3"},
            video={"file_id": "m", "file_unique_id": "4", "duration": 5, "mime_type": "video/mp4"},
        )
    ).message
    assert message is not None and message.text is None
    assert message.attachments == (
        Attachment(AttachmentKind.FILE, "q3.pdf", "d", "application/pdf", 10),
        Attachment(AttachmentKind.AUDIO, "voice.ogg", "v", "audio/ogg", duration=3.0),
        Attachment(AttachmentKind.AUDIO, "song.mp3", "a", duration=200.0),
        Attachment(AttachmentKind.VIDEO, "video.mp4", "m", "video/mp4", duration=5.0),
    )


def test_a_text_message_has_no_attachments() -> None:
    message = parse_update(_update(text="hello")).message
    assert message is not None and message.attachments == () and message.text == "hello"


@pytest.mark.parametrize(
    ("fields", "path"),
    [
        ({"photo": []}, "message.photo"),
        ({"photo": ["x"]}, "message.photo[0]"),
        ({"document": {"file_unique_id": "1"}}, "message.document.file_id"),
        ({"voice": {"file_id": 5}}, "message.voice.file_id"),
        ({"video": {"file_id": "v", "duration": "long"}}, "message.video.duration"),
        ({"document": {"file_id": "d", "file_size": -1}}, "message.document"),
    ],
)
def test_a_malformed_media_field_is_refused_naming_it(fields: dict[str, Any], path: str) -> None:
    with pytest.raises(UpdateParseError) as caught:
        parse_update(_update(**fields))
    assert path in str(caught.value)
