"""English→Korean lexicon and Korean morphology: particles by batchim, verb and adjective
endings."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

HANGUL_FIRST, HANGUL_LAST = 0xAC00, 0xD7A3
RIEUL, NIEUN, SSANG_SIOS = 8, 4, 20  # final-consonant (jongseong) indices
VOWEL_A, VOWEL_AE, VOWEL_EO, VOWEL_E, VOWEL_YEO, VOWEL_O, VOWEL_WA = 0, 1, 4, 5, 6, 8, 9
VOWEL_OE, VOWEL_WAE, VOWEL_U, VOWEL_WEO, VOWEL_EU, VOWEL_I = 11, 10, 13, 14, 18, 20


def split_syllable(c: str) -> tuple[int, int, int]:
    """(initial, vowel, final) indices of one Hangul syllable (final 0 = no batchim)."""
    code = ord(c) - HANGUL_FIRST
    if not 0 <= code <= HANGUL_LAST - HANGUL_FIRST:
        raise ValueError(f"not a Hangul syllable: {c!r}")
    return code // 588, (code % 588) // 28, code % 28


def join_syllable(initial: int, vowel: int, final: int) -> str:
    return chr(HANGUL_FIRST + initial * 588 + vowel * 28 + final)


def final_consonant(word: str) -> int:
    """Batchim index of the last syllable: (ord(c) - 0xAC00) % 28; 0 when it ends in a vowel."""
    return split_syllable(word[-1])[2]


def has_batchim(word: str) -> bool:
    return final_consonant(word) != 0


def with_final(word: str, final: int) -> str:
    """`word` with the batchim of its last syllable replaced."""
    initial, vowel, _ = split_syllable(word[-1])
    return word[:-1] + join_syllable(initial, vowel, final)


PARTICLES = {  # role: (after a batchim, after a vowel)
    "topic": ("은", "는"),
    "subject": ("이", "가"),
    "object": ("을", "를"),
    "and": ("과", "와"),
    "direction": ("으로", "로"),
}
FIXED_PARTICLES = {"dative": "에게", "at": "에", "in": "에서"}


def particle(noun: str, role: str) -> str:
    """`noun` + the case particle for `role`, chosen by its batchim (ㄹ-final nouns take 로)."""
    if role in FIXED_PARTICLES:
        return noun + FIXED_PARTICLES[role]
    after_consonant, after_vowel = PARTICLES[role]
    final = final_consonant(noun)
    if role == "direction" and final == RIEUL:
        return noun + after_vowel
    return noun + (after_consonant if final else after_vowel)


_CONTRACT = {
    VOWEL_A: VOWEL_A,
    VOWEL_AE: VOWEL_AE,
    VOWEL_EO: VOWEL_EO,
    VOWEL_E: VOWEL_E,
    VOWEL_O: VOWEL_WA,
    VOWEL_U: VOWEL_WEO,
    VOWEL_I: VOWEL_YEO,
    VOWEL_EU: VOWEL_EO,
    VOWEL_OE: VOWEL_WAE,
}


@dataclass(frozen=True)
class Verb:
    """A Korean action verb by its stem; `irregular` is "" or "d" (ㄷ→ㄹ) or "b" (ㅂ→우/오)."""

    stem: str
    irregular: str = ""

    def present(self) -> str:
        """Plain present declarative: 읽는다, 간다, 논다 (-ㄴ다 after a vowel or ㄹ, -는다 after a
        consonant)."""
        final = final_consonant(self.stem)
        if final in (0, RIEUL):
            return with_final(self.stem, NIEUN) + "다"
        return self.stem + "는다"

    def past(self) -> str:
        """Plain past declarative: 읽었다, 찾았다, 갔다, 봤다, 마셨다, 했다, 들었다, 도왔다."""
        stem = self.stem
        if stem.endswith("하"):
            return stem[:-1] + "했다"
        if self.irregular == "b":
            bare = with_final(stem, 0)
            return bare + ("왔다" if split_syllable(bare[-1])[1] == VOWEL_O else "웠다")
        if self.irregular == "d":
            stem = with_final(stem, RIEUL)
        initial, vowel, final = split_syllable(stem[-1])
        if final or vowel not in _CONTRACT:
            return stem + ("았다" if vowel in (VOWEL_A, VOWEL_O) and final else "었다")
        return stem[:-1] + join_syllable(initial, _CONTRACT[vowel], SSANG_SIOS) + "다"

    def adnominal(self, past: bool = False) -> str:
        """Relative-clause form: present 읽는/가는/노는, past 읽은/간/논/들은/도운."""
        final = final_consonant(self.stem)
        if not past:
            return (with_final(self.stem, 0) if final == RIEUL else self.stem) + "는"
        if final in (0, RIEUL):
            return with_final(self.stem, NIEUN)
        if self.irregular == "b":
            return with_final(self.stem, 0) + "운"
        if self.irregular == "d":
            return with_final(self.stem, RIEUL) + "은"
        return self.stem + "은"

    def connective(self, ending: str, past: bool = False) -> str:
        """Clause-linking form: stem + 고 ('and') or 지만 ('but'); past 지만 keeps the tense
        (읽었지만)."""
        return (self.past()[:-1] if past else self.stem) + ending


@dataclass(frozen=True)
class Noun:
    """An English noun and its Korean word; `kind` is its semantic class, `tags` what verbs may take
    it."""

    en: str
    ko: str
    kind: str  # person | animal | place | thing | food | drink | subject
    tags: frozenset[str] = frozenset()
    article: str = "count"  # count (a/the) | mass (the) | none (proper names, school subjects)
    prep: str = "in"  # English locative preposition for places


@dataclass(frozen=True)
class Adjective:
    """An English adjective with its Korean adnominal (큰), present (크다) and past (컸다) predicate
    forms."""

    en: str
    adnominal: str
    present: str
    past: str
    kinds: frozenset[str]

    @property
    def stem(self) -> str:
        return self.present[:-1]


@dataclass(frozen=True)
class VerbEntry:
    """An English verb (base, 3sg, past) with its Korean verb and the frames it appears in."""

    en: tuple[str, str, str]
    ko: Verb
    frames: frozenset[str]  # intr | tr | ditr | motion
    objects: frozenset[str] = frozenset()  # noun kinds or tags accepted as direct object
    subjects: frozenset[str] = frozenset({"person", "animal"})
    # Korean locative particle role: "in" (에서, activities) or "at" (에, position)
    locative: str = "in"


@dataclass(frozen=True)
class Adverb:
    """An English adverb and its Korean word; time adverbs open the Korean clause, others precede
    the verb."""

    en: str
    ko: str
    time: bool = False
    tense: str = ""  # "" (any) | "present" | "past"


def _nouns(kind: str, rows: str, **extra) -> list[Noun]:
    """Parse 'english korean [tag,tag]' rows."""
    out = []
    for row in rows.strip().splitlines():
        en, ko, *tags = row.split()
        out.append(
            Noun(en, ko, kind, frozenset(tags[0].split(",")) if tags else frozenset(), **extra)
        )
    return out


NOUNS: list[Noun] = [
    *_nouns(
        "person",
        """
man 남자
woman 여자
boy 소년
girl 소녀
child 아이
baby 아기
student 학생
teacher 선생님
doctor 의사
nurse 간호사
cook 요리사
farmer 농부
singer 가수
painter 화가
writer 작가
friend 친구
king 왕
queen 여왕
soldier 군인
driver 운전사
scientist 과학자
grandmother 할머니
grandfather 할아버지
neighbor 이웃
lawyer 변호사
policeman 경찰관
""",
    ),
    *_nouns(
        "animal",
        """
dog 개
cat 고양이
bird 새
horse 말
cow 소
tiger 호랑이
rabbit 토끼
bear 곰
monkey 원숭이
fish 물고기
duck 오리
pig 돼지
mouse 쥐
lion 사자
elephant 코끼리
""",
    ),
    *_nouns(
        "place",
        """
library 도서관
school 학교
house 집
park 공원
restaurant 식당
hospital 병원
kitchen 부엌
garden 정원
room 방
office 사무실
classroom 교실
river 강
forest 숲
village 마을
city 도시
church 교회
shop 가게
museum 박물관
zoo 동물원
hotel 호텔
""",
    ),
    *_nouns(
        "place",
        """
market 시장
station 역
airport 공항
""",
        prep="at",
    ),
    *_nouns(
        "place",
        """
seoul 서울
busan 부산
""",
        article="none",
    ),
    *_nouns(
        "thing",
        """
book 책 read,write,open,send,lend,show
letter 편지 read,write,send,show
newspaper 신문 read,show
map 지도 read,show,make,lend
pen 펜 lend
pencil 연필 lend
bag 가방 open,make,lend
box 상자 open,make,send,throw
chair 의자 make,fix
table 탁자 make,fix
door 문 open,fix
window 창문 open,fix
car 자동차 fix,lend
bicycle 자전거 fix,lend
ball 공 throw,lend
picture 그림 make,send,show
flower 꽃 send
tree 나무
hat 모자 make,lend
key 열쇠 throw,lend
phone 전화기 fix,lend
computer 컴퓨터 fix,lend
umbrella 우산 open,lend
clock 시계 fix
camera 카메라 fix,lend
cup 컵 make,throw
gift 선물 send,show
toy 장난감 make,fix,throw
ticket 표 show,send
stone 돌 throw
song 노래 hear,write
story 이야기 hear,write,read
""",
    ),
    *_nouns(
        "food",
        """
apple 사과 throw
orange 오렌지 throw
banana 바나나
egg 달걀
cake 케이크 make
""",
    ),
    *_nouns(
        "food",
        """
bread 빵 make
rice 밥
meat 고기
soup 수프 make
cheese 치즈
""",
        article="mass",
    ),
    *_nouns(
        "drink",
        """
water 물
milk 우유
coffee 커피
tea 차
juice 주스
""",
        article="mass",
    ),
    *_nouns(
        "subject",
        """
music 음악 hear
english 영어
korean 한국어
math 수학
history 역사
""",
        article="none",
    ),
]

ANIMATE = frozenset({"person", "animal"})
PERSON = frozenset({"person"})
THINGS = frozenset({"thing", "food", "drink"})
ANY = frozenset({"person", "animal", "place", "thing", "food", "drink", "subject"})


def _verb(
    en: str,
    ko: str,
    frames: str,
    objects: Iterable[str] | str = (),
    irregular: str = "",
    subjects: frozenset[str] = ANIMATE,
    locative: str = "in",
) -> VerbEntry:
    """One verb from 'base/3sg/past', its Korean dictionary form and comma-separated frames and
    objects."""
    base, third, past = en.split("/")
    objects = frozenset(objects.split(",") if isinstance(objects, str) else objects)
    return VerbEntry(
        (base, third, past),
        Verb(ko.removesuffix("다"), irregular),
        frozenset(frames.split(",")),
        objects,
        subjects,
        locative,
    )


VERBS: list[VerbEntry] = [
    # intransitive
    _verb("sleep/sleeps/slept", "자다", "intr"),
    _verb("run/runs/ran", "달리다", "intr"),
    _verb("laugh/laughs/laughed", "웃다", "intr", subjects=PERSON),
    _verb("cry/cries/cried", "울다", "intr"),
    _verb("walk/walks/walked", "걷다", "intr", irregular="d"),
    _verb("sing/sings/sang", "노래하다", "intr", subjects=PERSON),
    _verb("dance/dances/danced", "춤추다", "intr", subjects=PERSON),
    _verb("swim/swims/swam", "수영하다", "intr"),
    _verb("work/works/worked", "일하다", "intr", subjects=PERSON),
    _verb("rest/rests/rested", "쉬다", "intr"),
    _verb("play/plays/played", "놀다", "intr"),
    _verb("wait/waits/waited", "기다리다", "intr"),
    _verb("sit/sits/sat", "앉다", "intr", locative="at"),
    _verb("live/lives/lived", "살다", "intr", locative="at"),
    # motion: "goes to X" ↔ "X(으)로 간다"
    _verb("go/goes/went", "가다", "motion"),
    _verb("come/comes/came", "오다", "motion"),
    _verb("return/returns/returned", "돌아가다", "motion"),
    # transitive and ditransitive
    _verb("read/reads/read", "읽다", "tr", "read", subjects=PERSON),
    _verb("write/writes/wrote", "쓰다", "tr,ditr", "write", subjects=PERSON),
    _verb("eat/eats/ate", "먹다", "tr", "food"),
    _verb("drink/drinks/drank", "마시다", "tr", "drink"),
    _verb("cook/cooks/cooked", "요리하다", "tr", "food", subjects=PERSON),
    _verb("see/sees/saw", "보다", "tr", ANY - {"subject"}),
    _verb("like/likes/liked", "좋아하다", "tr", ANY),
    _verb("love/loves/loved", "사랑하다", "tr", ANIMATE),
    _verb("buy/buys/bought", "사다", "tr", THINGS, subjects=PERSON),
    _verb("sell/sells/sold", "팔다", "tr,ditr", THINGS, subjects=PERSON),
    _verb("make/makes/made", "만들다", "tr", "make", subjects=PERSON),
    _verb("find/finds/found", "찾다", "tr", {"thing", "animal", "person"}),
    _verb("open/opens/opened", "열다", "tr", "open", subjects=PERSON),
    _verb("close/closes/closed", "닫다", "tr", "open", subjects=PERSON),
    _verb(
        "draw/draws/drew", "그리다", "tr", {"person", "animal", "place", "thing"}, subjects=PERSON
    ),
    _verb("help/helps/helped", "돕다", "tr", PERSON, irregular="b"),
    _verb("meet/meets/met", "만나다", "tr", PERSON, subjects=PERSON),
    _verb("teach/teaches/taught", "가르치다", "tr,ditr", "subject", subjects=PERSON),
    _verb("study/studies/studied", "공부하다", "tr", "subject", subjects=PERSON),
    _verb("hear/hears/heard", "듣다", "tr", "hear", irregular="d"),
    _verb("catch/catches/caught", "잡다", "tr", {"animal", "throw"}),
    _verb("throw/throws/threw", "던지다", "tr,ditr", "throw", subjects=PERSON),
    _verb("fix/fixes/fixed", "고치다", "tr", "fix", subjects=PERSON),
    _verb("remember/remembers/remembered", "기억하다", "tr", ANY, subjects=PERSON),
    _verb("visit/visits/visited", "방문하다", "tr", "place", subjects=PERSON),
    _verb("lose/loses/lost", "잃어버리다", "tr", "thing", subjects=PERSON),
    _verb("clean/cleans/cleaned", "청소하다", "tr", "place", subjects=PERSON),
    _verb("give/gives/gave", "주다", "ditr", THINGS, subjects=PERSON),
    _verb("send/sends/sent", "보내다", "ditr", "send", subjects=PERSON),
    _verb("show/shows/showed", "보여주다", "ditr", "show", subjects=PERSON),
    _verb("lend/lends/lent", "빌려주다", "ditr", "lend", subjects=PERSON),
]


def _adjectives(kinds: frozenset[str], rows: str) -> list[Adjective]:
    """Parse 'english adnominal present past' rows."""
    return [Adjective(*row.split(), kinds=kinds) for row in rows.strip().splitlines()]


PHYSICAL = frozenset({"person", "animal", "place", "thing", "food"})
# English order of adjectives (opinion, size, quality, colour) follows this list.
ADJECTIVES: list[Adjective] = [
    *_adjectives(
        frozenset({"person", "animal", "place", "thing"}),
        """
good 좋은 좋다 좋았다
bad 나쁜 나쁘다 나빴다
beautiful 아름다운 아름답다 아름다웠다
pretty 예쁜 예쁘다 예뻤다
""",
    ),
    *_adjectives(
        PERSON,
        """
kind 친절한 친절하다 친절했다
busy 바쁜 바쁘다 바빴다
tired 피곤한 피곤하다 피곤했다
young 젊은 젊다 젊었다
""",
    ),
    *_adjectives(
        ANIMATE,
        """
happy 행복한 행복하다 행복했다
sad 슬픈 슬프다 슬펐다
smart 똑똑한 똑똑하다 똑똑했다
hungry 배고픈 배고프다 배고팠다
strong 강한 강하다 강했다
cute 귀여운 귀엽다 귀여웠다
""",
    ),
    *_adjectives(
        frozenset({"person", "place"}),
        """
famous 유명한 유명하다 유명했다
quiet 조용한 조용하다 조용했다
""",
    ),
    *_adjectives(
        frozenset({"food", "drink"}),
        """
delicious 맛있는 맛있다 맛있었다
sweet 단 달다 달았다
""",
    ),
    *_adjectives(
        frozenset({"thing", "food"}),
        """
expensive 비싼 비싸다 비쌌다
cheap 싼 싸다 쌌다
""",
    ),
    *_adjectives(
        PHYSICAL,
        """
big 큰 크다 컸다
small 작은 작다 작았다
""",
    ),
    *_adjectives(
        frozenset({"animal", "thing"}),
        """
long 긴 길다 길었다
short 짧은 짧다 짧았다
""",
    ),
    *_adjectives(
        frozenset({"thing"}),
        """
heavy 무거운 무겁다 무거웠다
light 가벼운 가볍다 가벼웠다
""",
    ),
    *_adjectives(
        frozenset({"animal"}),
        """
fast 빠른 빠르다 빨랐다
slow 느린 느리다 느렸다
""",
    ),
    *_adjectives(
        frozenset({"thing", "food", "drink"}),
        """
hot 뜨거운 뜨겁다 뜨거웠다
cold 차가운 차갑다 차가웠다
""",
    ),
    *_adjectives(
        frozenset({"thing", "place", "animal"}),
        """
clean 깨끗한 깨끗하다 깨끗했다
dirty 더러운 더럽다 더러웠다
""",
    ),
    *_adjectives(
        frozenset({"thing", "animal"}),
        """
red 빨간 빨갛다 빨갰다
blue 파란 파랗다 파랬다
yellow 노란 노랗다 노랬다
white 하얀 하얗다 하얬다
black 까만 까맣다 까맸다
""",
    ),
]

VERY = Adverb("very", "매우")
ADVERBS: list[Adverb] = [
    Adverb("quickly", "빨리"),
    Adverb("slowly", "천천히"),
    Adverb("quietly", "조용히"),
    Adverb("happily", "행복하게"),
    Adverb("often", "자주"),
    Adverb("again", "다시"),
    Adverb("well", "잘"),
    Adverb("today", "오늘", time=True),
    Adverb("every day", "매일", time=True),
    Adverb("yesterday", "어제", time=True, tense="past"),
    Adverb("now", "지금", time=True, tense="present"),
]
