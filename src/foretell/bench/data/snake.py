"""A small terminal snake game (curses). Arrow keys or WASD steer, P pauses, Q quits."""

import curses
import random
import time

WIDTH = 40
HEIGHT = 20
START_LENGTH = 4
TICK = 0.12
SPEEDUP = 0.97

UP = (0, -1)
DOWN = (0, 1)
LEFT = (-1, 0)
RIGHT = (1, 0)

KEYS = {
    curses.KEY_UP: UP, ord("w"): UP,
    curses.KEY_DOWN: DOWN, ord("s"): DOWN,
    curses.KEY_LEFT: LEFT, ord("a"): LEFT,
    curses.KEY_RIGHT: RIGHT, ord("d"): RIGHT,
}


def newSnake():
    x, y = WIDTH // 2, HEIGHT // 2
    return [(x - i, y) for i in range(START_LENGTH)]


def placeFood(snake):
    free = [(x, y) for x in range(1, WIDTH - 1) for y in range(1, HEIGHT - 1) if (x, y) not in snake]
    return random.choice(free) if free else None


def nextHead(snake, direction):
    x, y = snake[0]
    dx, dy = direction
    return (x + dx, y + dy)


def hitsWall(pos):
    x, y = pos
    return x <= 0 or x >= WIDTH - 1 or y <= 0 or y >= HEIGHT - 1


def turn(direction, key):
    wantedDir = KEYS.get(key)
    if wantedDir is None:
        return direction
    if wantedDir[0] == -direction[0] and wantedDir[1] == -direction[1]:
        return direction
    return wantedDir


def draw(screen, snake, food, isPaused):
    screen.erase()
    for x in range(WIDTH):
        screen.addstr(0, x, "#")
        screen.addstr(HEIGHT - 1, x, "#")
    for y in range(HEIGHT):
        screen.addstr(y, 0, "#")
        screen.addstr(y, WIDTH - 1, "#")
    if food is not None:
        screen.addstr(food[1], food[0], "*")
    for i, (x, y) in enumerate(snake):
        screen.addstr(y, x, "@" if i == 0 else "o")
    if isPaused:
        screen.addstr(HEIGHT // 2, WIDTH // 2 - 3, "PAUSED")
    screen.refresh()


def gameOver(screen, length):
    message = f"Game over! Length: {length}. Press any key."
    screen.nodelay(False)
    screen.addstr(HEIGHT // 2, max(1, (WIDTH - len(message)) // 2), message)
    screen.refresh()
    screen.getch()


def play(screen):
    curses.curs_set(0)
    screen.nodelay(True)
    screen.keypad(True)
    snake = newSnake()
    direction = RIGHT
    food = placeFood(snake)
    tickDelay = TICK
    isPaused = False
    while True:
        key = screen.getch()
        if key in (ord("q"), ord("Q")):
            return
        if key in (ord("p"), ord("P")):
            isPaused = not isPaused
        if not isPaused:
            direction = turn(direction, key)
            head = nextHead(snake, direction)
            if hitsWall(head) or head in snake[:-1]:
                gameOver(screen, len(snake))
                return
            snake.insert(0, head)
            if head == food:
                food = placeFood(snake)
                tickDelay *= SPEEDUP
                if food is None:
                    gameOver(screen, len(snake))
                    return
            else:
                snake.pop()
        draw(screen, snake, food, isPaused)
        time.sleep(tickDelay)


def main():
    curses.wrapper(play)


if __name__ == "__main__":
    main()
